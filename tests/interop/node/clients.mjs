// Drives one Node.js Kafka client against a broker, as tests/interop/test_node_clients.py
// asks: node clients.mjs <kafkajs|platformatic> <bootstrap> <topic> <group> <replicas>
// It creates the topic (2 partitions), produces 20 records uncompressed and 20
// gzip-compressed, consumes all 40 in a group and commits, runs the admin calls the
// client has, and prints one JSON line with what it saw. Errors exit non-zero.
import kafkajs from 'kafkajs'
import {
  Admin,
  Consumer,
  Producer,
  stringDeserializers,
  stringSerializers
} from '@platformatic/kafka'

const [client, bootstrap, topic, group, replicas] = process.argv.slice(2)
const replicationFactor = Number(replicas)
const brokers = bootstrap.split(',')
const values = (codec) => Array.from({ length: 20 }, (_, i) => ({ key: `k${i}`, value: `${codec}-${i}` }))

async function withKafkajs () {
  const kafka = new kafkajs.Kafka({ clientId: 'interop-kafkajs', brokers, logLevel: kafkajs.logLevel.NOTHING })
  const admin = kafka.admin()
  await admin.connect()
  await admin.createTopics({ topics: [{ topic, numPartitions: 2, replicationFactor }], waitForLeaders: true })
  const producer = kafka.producer()
  await producer.connect()
  await producer.send({ topic, messages: values('none') })
  await producer.send({ topic, compression: kafkajs.CompressionTypes.GZIP, messages: values('gzip') })
  await producer.disconnect()

  const consumer = kafka.consumer({ groupId: group })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  const seen = []
  await new Promise((resolve) => {
    consumer.run({
      eachMessage: async ({ message }) => {
        seen.push(message.value.toString())
        if (seen.length === 40) resolve()
      }
    })
  })
  await consumer.disconnect() // commits what was consumed
  const offsets = await admin.fetchOffsets({ groupId: group, topics: [topic] })
  const committed = offsets[0].partitions.reduce((n, p) => n + Number(p.offset), 0)
  await admin.createPartitions({ topicPartitions: [{ topic, count: 3 }] })
  const meta = await admin.fetchTopicMetadata({ topics: [topic] })
  const described = await admin.describeGroups([group])
  const configs = await admin.describeConfigs({
    resources: [{ type: kafkajs.ConfigResourceTypes.TOPIC, name: topic }],
    includeSynonyms: false
  })
  await admin.disconnect()
  return {
    consumed: seen.sort(),
    committed,
    partitions: meta.topics[0].partitions.length,
    groupState: described.groups[0].state,
    configEntries: configs.resources[0].configEntries.length
  }
}

async function withPlatformatic () {
  const admin = new Admin({ clientId: 'interop-platformatic', bootstrapBrokers: brokers })
  await admin.createTopics({ topics: [topic], partitions: 2, replicas: replicationFactor })
  const producer = new Producer({ clientId: 'interop-platformatic', bootstrapBrokers: brokers, serializers: stringSerializers })
  for (const compression of ['none', 'gzip']) {
    await producer.send({ messages: values(compression).map((m) => ({ ...m, topic })), compression })
  }
  await producer.close()

  const consumer = new Consumer({ groupId: group, clientId: 'interop-platformatic', bootstrapBrokers: brokers, deserializers: stringDeserializers })
  const stream = await consumer.consume({ autocommit: false, topics: [topic], mode: 'earliest' })
  const seen = []
  for await (const message of stream) {
    seen.push(message.value)
    await message.commit()
    if (seen.length === 40) break
  }
  await stream.close()
  await consumer.close()
  const offsets = await admin.listConsumerGroupOffsets({ groups: [group] })
  let committed = 0
  for (const g of offsets) for (const t of g.topics) for (const p of t.partitions) committed += Number(p.committedOffset)
  await admin.createPartitions({ topics: [{ name: topic, count: 3 }] })
  const meta = await admin.metadata({ topics: [topic] })
  const described = await admin.describeGroups({ groups: [group] })
  await admin.close()
  return {
    consumed: seen.sort(),
    committed,
    partitions: meta.topics.get(topic).partitionsCount,
    groupState: described.get(group).state,
    configEntries: -1
  }
}

const result = client === 'kafkajs' ? await withKafkajs() : await withPlatformatic()
console.log(JSON.stringify(result))
process.exit(0)
