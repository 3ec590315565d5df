// KafkaJS against a broker: admin, gzip produce, a consumer group, an explicit commit.
//
//   node kafkajs_scenario.js BOOTSTRAP TOPIC GROUP COUNT
//
// NODE_PATH must reach kafkajs (tests/interop/test_kafkajs.py installs it into a cache folder).
// Prints one JSON object on stdout with what each step saw; the Python test asserts on it.
// Every wait is bounded: the whole run gives up after 90 s (exit 2).

'use strict'

const { Kafka, CompressionTypes, logLevel } = require('kafkajs')

const [bootstrap, topic, groupId, countText] = process.argv.slice(2)
const count = Number(countText)
const PARTITIONS = 3

const giveUp = setTimeout(() => {
  process.stderr.write('kafkajs scenario: timed out after 90 s\n')
  process.exit(2)
}, 90000)

async function main () {
  const kafka = new Kafka({
    clientId: 'odradek-interop-kafkajs',
    brokers: [bootstrap],
    logLevel: logLevel.WARN,
    retry: { retries: 5, initialRetryTime: 100 }
  })
  const out = {}

  // admin: create, list, describe
  const admin = kafka.admin()
  await admin.connect()
  out.created = await admin.createTopics({
    topics: [{ topic, numPartitions: PARTITIONS, replicationFactor: 1 }],
    waitForLeaders: true
  })
  out.topics = await admin.listTopics()
  const metadata = await admin.fetchTopicMetadata({ topics: [topic] })
  out.partitions = metadata.topics[0].partitions.map(p => p.partitionId).sort()

  // produce gzip-compressed batches, acks=all
  const producer = kafka.producer()
  await producer.connect()
  const messages = []
  for (let i = 0; i < count; i++) {
    messages.push({ key: `key-${i}`, value: `value-${i}`, headers: { n: String(i) } })
  }
  const sent = []
  for (let i = 0; i < count; i += 10) {
    const answer = await producer.send({
      topic,
      acks: -1,
      compression: CompressionTypes.GZIP,
      messages: messages.slice(i, i + 10)
    })
    sent.push(...answer.map(r => ({ partition: r.partition, errorCode: r.errorCode })))
  }
  await producer.disconnect()
  out.sent = sent
  out.topicOffsets = (await admin.fetchTopicOffsets(topic))
    .map(p => ({ partition: p.partition, high: Number(p.high), low: Number(p.low) }))
    .sort((a, b) => a.partition - b.partition)

  // consume in a group from the beginning, commit explicitly, leave
  const consumer = kafka.consumer({ groupId, sessionTimeout: 10000, heartbeatInterval: 500 })
  await consumer.connect()
  await consumer.subscribe({ topics: [topic], fromBeginning: true })
  const received = []
  const next = {} // partition -> offset after the last record consumed
  let membership = null
  consumer.on(consumer.events.GROUP_JOIN, e => {
    membership = { leaderId: e.payload.leaderId, memberId: e.payload.memberId, assignment: e.payload.memberAssignment }
  })
  await new Promise((resolve, reject) => {
    consumer.run({
      autoCommit: false,
      eachMessage: async ({ partition, message }) => {
        received.push({
          partition,
          offset: Number(message.offset),
          key: message.key.toString(),
          value: message.value.toString(),
          n: message.headers.n.toString()
        })
        next[partition] = Number(message.offset) + 1
        if (received.length === count) resolve()
      }
    }).catch(reject)
  })
  await consumer.commitOffsets(
    Object.entries(next).map(([partition, offset]) => ({ topic, partition: Number(partition), offset: String(offset) }))
  )
  out.described = (await admin.describeGroups([groupId])).groups
    .map(g => ({ groupId: g.groupId, state: g.state, protocolType: g.protocolType, members: g.members.length }))
  await consumer.disconnect()
  out.membership = membership
  out.received = received
  out.committed = (await admin.fetchOffsets({ groupId, topics: [topic] }))[0].partitions
    .map(p => ({ partition: p.partition, offset: Number(p.offset) }))
    .sort((a, b) => a.partition - b.partition)
  out.groups = (await admin.listGroups()).groups.map(g => g.groupId)
  out.describedAfterLeave = (await admin.describeGroups([groupId])).groups.map(g => g.state)
  await admin.disconnect()
  return out
}

main().then(out => {
  clearTimeout(giveUp)
  process.stdout.write(JSON.stringify(out) + '\n')
}, err => {
  clearTimeout(giveUp)
  process.stderr.write(`kafkajs scenario failed: ${err && err.stack ? err.stack : err}\n`)
  process.exit(1)
})
