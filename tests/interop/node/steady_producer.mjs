// A kafkajs producer for the cluster fault tests (tests/cluster/test_netsplit.py):
//   node steady_producer.mjs <bootstrap> <topic> <name>
// Idempotent, acks=all, one record in flight: sends `<name>-<seq>` to partition 0 for
// seq = 0, 1, 2, ... and prints one JSON line per outcome, {"seq", "offset", "at"} or
// {"seq", "error", "at"} (at: Unix seconds). kafkajs retries each send for up to
// 180 s, as the Python producers of the test do. SIGTERM stops it after the send in
// flight; it prints {"done": true} last. kafkajs's own warnings are JSON lines too
// (with a "level"); they stay in the output for diagnosis.
import kafkajs from 'kafkajs'

const [bootstrap, topic, name] = process.argv.slice(2)
const kafka = new kafkajs.Kafka({
  clientId: `netsplit-${name}`,
  brokers: bootstrap.split(','),
  requestTimeout: 10000,
  connectionTimeout: 3000,
  retry: { initialRetryTime: 100, maxRetryTime: 1000, retries: 1000 },
  logLevel: kafkajs.logLevel.WARN
})
const producer = kafka.producer({
  idempotent: true,
  maxInFlightRequests: 1,
  metadataMaxAge: 1000,
  allowAutoTopicCreation: false
})

let stopping = false
process.on('SIGTERM', () => { stopping = true })
const now = () => Date.now() / 1000
const emit = (line) => process.stdout.write(JSON.stringify(line) + '\n')

await producer.connect()
for (let seq = 0; !stopping; seq++) {
  try {
    const [meta] = await producer.send({
      topic,
      acks: -1,
      timeout: 10000,
      messages: [{ value: `${name}-${seq}`, partition: 0 }]
    })
    emit({ seq, offset: Number(meta.baseOffset), at: now() })
  } catch (e) {
    emit({ seq, error: `${e.name}: ${e.message}`, at: now() })
  }
}
await producer.disconnect()
emit({ done: true })
process.exit(0)
