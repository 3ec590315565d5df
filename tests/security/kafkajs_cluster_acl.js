// KafkaJS against a secured cluster (SASL_SSL, SCRAM-SHA-512): produce COUNT records to TOPIC
// (partition i % PARTITIONS), read them back through the consumer group GROUP, then try to
// produce to DENIED, a topic the user has no ACL for.
//
//   node kafkajs_cluster_acl.js BOOTSTRAPS CA_PEM USER PASSWORD TOPIC PARTITIONS GROUP DENIED COUNT
//
// BOOTSTRAPS is comma-separated host:port. NODE_PATH must reach kafkajs. Prints one JSON object
// on stdout: {sent: [errorCode per partition], received: [{partition, value}], denied: {name,
// type}} (type: the Kafka error KafkaJS reports, e.g. TOPIC_AUTHORIZATION_FAILED). Every wait
// is bounded: the whole run gives up after 60 s (exit 2).

'use strict'

const fs = require('fs')
const { Kafka, logLevel } = require('kafkajs')

const [bootstraps, caPem, username, password, topic, partitionsText, groupId, denied, countText] =
  process.argv.slice(2)
const count = Number(countText)
const partitions = Number(partitionsText)

const giveUp = setTimeout(() => {
  process.stderr.write('kafkajs cluster acl scenario: timed out after 60 s\n')
  process.exit(2)
}, 60000)

/** The Kafka error type of err or of the first error it wraps (retriers aggregate errors). */
function kafkaType (err) {
  for (let e = err; e; e = e.originalError || (e.errors && e.errors[0]) || e.cause) {
    if (e.type) return e.type
    if (e === e.originalError) break
  }
  return null
}

async function main () {
  const kafka = new Kafka({
    clientId: 'odradek-cluster-kafkajs',
    brokers: bootstraps.split(','),
    ssl: { ca: [fs.readFileSync(caPem, 'utf-8')] },
    sasl: { mechanism: 'scram-sha-512', username, password },
    logLevel: logLevel.NOTHING,
    retry: { retries: 2, initialRetryTime: 100 }
  })
  const out = {}
  const producer = kafka.producer({ allowAutoTopicCreation: false })
  await producer.connect()
  const messages = []
  for (let i = 0; i < count; i++) messages.push({ partition: i % partitions, key: `k${i}`, value: `v${i}` })
  const answer = await producer.send({ topic, acks: -1, messages })
  out.sent = answer.map(r => r.errorCode)

  try {
    await producer.send({ topic: denied, acks: -1, messages: [{ value: 'nope' }] })
    out.denied = null
  } catch (err) {
    out.denied = { name: err.name, type: kafkaType(err), message: err.message }
  }
  await producer.disconnect()

  const consumer = kafka.consumer({ groupId, sessionTimeout: 10000, heartbeatInterval: 500 })
  await consumer.connect()
  await consumer.subscribe({ topics: [topic], fromBeginning: true })
  const received = []
  await new Promise((resolve, reject) => {
    // a crash KafkaJS does not restart from (e.g. GROUP_AUTHORIZATION_FAILED) ends the run
    consumer.on(consumer.events.CRASH, ({ payload }) => { if (!payload.restart) reject(payload.error) })
    consumer.run({
      eachMessage: async ({ partition, message }) => {
        received.push({ partition, value: message.value.toString() })
        if (received.length === count) resolve()
      }
    }).catch(reject)
  })
  await consumer.disconnect()
  out.received = received
  return out
}

main().then(out => {
  clearTimeout(giveUp)
  process.stdout.write(JSON.stringify(out) + '\n')
}, err => {
  clearTimeout(giveUp)
  process.stderr.write(`kafkajs cluster acl scenario failed: ${err && err.stack ? err.stack : err}\n`)
  process.exit(1)
})
