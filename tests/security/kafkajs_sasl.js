// KafkaJS over SASL_SSL: admin, produce, a consumer group, with the mechanism given.
//
//   node kafkajs_sasl.js BOOTSTRAP CA_PEM MECHANISM USER PASSWORD TOPIC COUNT
//
// MECHANISM is KafkaJS's name (plain, scram-sha-256, scram-sha-512). NODE_PATH must reach
// kafkajs (tests/interop/test_kafkajs.py's install_kafkajs). Prints one JSON object on stdout:
// {created, sent, received: [values]} on success, {error: name, message} when authentication
// fails. Every wait is bounded: the whole run gives up after 60 s (exit 2).

'use strict'

const fs = require('fs')
const { Kafka, logLevel } = require('kafkajs')

const [bootstrap, caPem, mechanism, username, password, topic, countText] = process.argv.slice(2)
const count = Number(countText)

const giveUp = setTimeout(() => {
  process.stderr.write('kafkajs sasl scenario: timed out after 60 s\n')
  process.exit(2)
}, 60000)

async function main () {
  const kafka = new Kafka({
    clientId: 'odradek-security-kafkajs',
    brokers: [bootstrap],
    ssl: { ca: [fs.readFileSync(caPem, 'utf-8')] },
    sasl: { mechanism, username, password },
    logLevel: logLevel.NOTHING,
    retry: { retries: 2, initialRetryTime: 100 }
  })
  const out = {}
  const admin = kafka.admin()
  try {
    await admin.connect()
  } catch (err) {
    return { error: err.name, message: err.message }
  }
  out.created = await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true })

  const producer = kafka.producer()
  await producer.connect()
  const messages = []
  for (let i = 0; i < count; i++) messages.push({ key: `k${i}`, value: `v${i}` })
  const answer = await producer.send({ topic, acks: -1, messages })
  out.sent = answer.map(r => r.errorCode)
  await producer.disconnect()

  const consumer = kafka.consumer({ groupId: `${topic}-g`, sessionTimeout: 10000, heartbeatInterval: 500 })
  await consumer.connect()
  await consumer.subscribe({ topics: [topic], fromBeginning: true })
  const received = []
  await new Promise((resolve, reject) => {
    consumer.run({
      eachMessage: async ({ message }) => {
        received.push(message.value.toString())
        if (received.length === count) resolve()
      }
    }).catch(reject)
  })
  await consumer.disconnect()
  await admin.disconnect()
  out.received = received
  return out
}

main().then(out => {
  clearTimeout(giveUp)
  process.stdout.write(JSON.stringify(out) + '\n')
}, err => {
  clearTimeout(giveUp)
  process.stderr.write(`kafkajs sasl scenario failed: ${err && err.stack ? err.stack : err}\n`)
  process.exit(1)
})
