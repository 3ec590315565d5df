// @kafkajs/confluent-schema-registry against odradek's registry: one run, JSON on stdout.
// argv: registry URL, subject.
const { SchemaRegistry, SchemaType } = require('@kafkajs/confluent-schema-registry')

async function main () {
  const [url, subject] = process.argv.slice(2)
  const registry = new SchemaRegistry({ host: url })
  const v1 = { type: 'record', name: 'Js', namespace: 'kjs', fields: [{ name: 'n', type: 'int' }] }
  const v2 = { ...v1, fields: [...v1.fields, { name: 's', type: 'string', default: 'x' }] }
  const bad = { ...v1, fields: [...v1.fields, { name: 'z', type: 'string' }] }
  const out = {}
  const first = await registry.register({ type: SchemaType.AVRO, schema: JSON.stringify(v1) }, { subject })
  out.first = first.id
  const encoded = await registry.encode(first.id, { n: 5 })
  out.frame = Array.from(encoded.subarray(0, 5))
  out.decoded = await registry.decode(encoded)
  const second = await registry.register({ type: SchemaType.AVRO, schema: JSON.stringify(v2) }, { subject })
  out.second = second.id
  out.latest = await registry.getLatestSchemaId(subject)
  out.bySchema = await registry.getRegistryIdBySchema(subject, { type: SchemaType.AVRO, schema: JSON.stringify(v1) })
  try {
    await registry.register({ type: SchemaType.AVRO, schema: JSON.stringify(bad) }, { subject })
    out.refused = null
  } catch (e) {
    out.refused = { status: e.status === undefined ? null : e.status, message: String(e.message) }
  }
  console.log(JSON.stringify(out))
}

main().catch(e => { console.error(e && e.stack ? e.stack : e); process.exit(1) })
