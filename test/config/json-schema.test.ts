// The JSON Schemas for gate.yaml and agent.yaml: the committed files are what the declarations
// generate, a standard validator (ajv) accepts the shipped example and what `gate-mux agent
// configure` writes, and the declarations agree with the readers: every key they declare is read
// (a wrong value there is refused at that key by the reader and by the JSON Schema alike).
import t, { type Test } from 'tap';
import { Ajv } from 'ajv';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { configure } from '../../lib/cli/agent-configure.js';
import { AGENT_SCHEMA } from '../../lib/config/agent-schema.js';
import { validateAgentConfig } from '../../lib/config/agent-config.js';
import { GATE_SCHEMA } from '../../lib/config/gate-schema.js';
import { JSON_SCHEMA_FILES, jsonSchemaText, type JsonSchemaFileName } from '../../lib/config/json-schema-files.js';
import { keysOf, type SchemaNode } from '../../lib/config/schema.js';
import { formatPath, type ConfigIssue } from '../../lib/config/checker.js';
import { validateConfig } from '../../lib/config/validate.js';
import { tempDir } from '../helpers/temp-dir.js';

const root = new URL('../../../', import.meta.url);
// strictRequired off: a channel's `oneOf: [{required: [static_version]}, {required: [forward_url]}]`
// names keys declared beside it, which is the standard way to say "exactly one of".
const ajv = new Ajv({ allErrors: true, strict: true, strictRequired: false });
const checkGate = ajv.compile(JSON_SCHEMA_FILES['gate.schema.json']);
const checkAgent = ajv.compile(JSON_SCHEMA_FILES['agent.schema.json']);

const SCHEMA_LINE = /^# yaml-language-server: \$schema=(\S+)\n/;

t.test('the committed schema files are what the declarations generate (npm run schema rewrites them)', async (t) => {
  for (const name of Object.keys(JSON_SCHEMA_FILES) as JsonSchemaFileName[]) {
    const committed = await readFile(new URL(`schema/${name}`, root), 'utf8');
    t.equal(committed, jsonSchemaText(name), `schema/${name} is up to date (npm run schema rewrites it)`);
  }
});

t.test('examples/gate.yaml: its first line names the schema, which accepts it', async (t) => {
  const path = fileURLToPath(new URL('examples/gate.yaml', root));
  const text = await readFile(path, 'utf8');
  const line = SCHEMA_LINE.exec(text);
  t.ok(line, 'starts with the yaml-language-server line');
  t.ok(existsSync(join(path, '..', line![1]!)), `${line![1]} exists beside it`);
  t.ok(checkGate(parse(text)), ajv.errorsText(checkGate.errors));
});

t.test("what `gate-mux agent configure` writes names this installation's schema, which accepts it", async (t) => {
  const dir = await tempDir(t, 'configure-schema');
  for (const [label, extra] of [
    ['smallest', []],
    [
      'everything',
      [
        '--token',
        'secret-token-123456',
        '--ca-pin',
        `sha256:${'ab'.repeat(32)}`,
        '--allow',
        '10.0.0.1:22',
        '--resource',
        'db:orders=10.0.0.5:5432@orders.example.com,10.9.9.9',
        '--resource',
        'ssh:bastion=10.0.0.1:22',
        '--upgrade-channel',
        'stable/cloud',
        '--package-manager',
        'apt',
        '--tunnel-addr',
        'gate.example.com:3024',
        '--server-name',
        'gate.example.com',
      ],
    ],
  ] as const) {
    const output = join(dir, `${label}.yaml`);
    const lines: string[] = [];
    const io = { out: (l: string) => lines.push(l), err: (l: string) => lines.push(l) };
    t.equal(await configure(['--proxy', 'gate.example.com:443', '--name', 'n1', ...extra, '--output', output], io), 0, lines.join('\n'));
    const text = await readFile(output, 'utf8');
    const line = SCHEMA_LINE.exec(text);
    t.ok(line, `${label}: starts with the yaml-language-server line`);
    const schemaPath = line![1]!;
    t.equal(schemaPath, fileURLToPath(new URL('schema/agent.schema.json', root)), "the package's own copy");
    t.equal(await readFile(schemaPath, 'utf8'), jsonSchemaText('agent.schema.json'));
    t.ok(checkAgent(parse(text)), `${label}: ${ajv.errorsText(checkAgent.errors)}`);
  }
});

/** Every key path the declaration names, `'*'` standing for a list item or a named mapping's value. */
function keyPaths(node: SchemaNode, path: string[] = []): string[][] {
  const children = node.properties ?? {};
  const out: string[][] = [];
  for (const [key, child] of Object.entries(children)) {
    out.push([...path, key]);
    const inner = child.items ?? (typeof child.additionalProperties === 'object' ? child.additionalProperties : undefined);
    if (child.properties) out.push(...keyPaths(child, [...path, key]));
    else if (inner?.properties) out.push(...keyPaths(inner, [...path, key, '*']));
  }
  return out;
}

/** A copy of `doc` with the value at `path` replaced; `'*'` is the first list item or mapping value. */
function withValue(doc: unknown, path: string[], value: unknown): unknown {
  if (path.length === 0) return value;
  const [step, ...rest] = path as [string, ...string[]];
  if (Array.isArray(doc)) return [withValue(doc[0] ?? {}, rest, value), ...doc.slice(1)];
  const map = (doc ?? {}) as Record<string, unknown>;
  if (step === '*') {
    const name = Object.keys(map)[0] ?? 'x';
    return { ...map, [name]: withValue(map[name], rest, value) };
  }
  return { ...map, [step]: withValue(map[step], rest, value) };
}

/** The concrete path `withValue` wrote, with `'*'` resolved as it resolved it. */
function concretePath(doc: unknown, path: string[]): Array<string | number> {
  const out: Array<string | number> = [];
  let node = doc;
  for (const step of path) {
    if (step === '*' && Array.isArray(node)) {
      out.push(0);
      node = node[0];
    } else {
      const key = step === '*' ? (Object.keys((node ?? {}) as object)[0] ?? 'x') : step;
      out.push(key);
      node = (node as Record<string, unknown> | undefined)?.[key];
    }
  }
  return out;
}

const WRONG = [{ surely_not_a_key: 1 }];

function checkEveryKeyIsRead(
  t: Test,
  declaration: SchemaNode,
  base: unknown,
  read: (raw: unknown) => ConfigIssue[],
  check: ReturnType<Ajv['compile']>,
  baseFor: (path: string[]) => unknown = () => base,
): void {
  t.same(read(base), [], 'the base document is valid');
  t.ok(check(base), ajv.errorsText(check.errors));
  const paths = keyPaths(declaration);
  t.ok(paths.length > 10, `${paths.length} keys declared`);
  for (const path of paths) {
    const doc = withValue(baseFor(path), path, WRONG);
    const at = formatPath(concretePath(doc, path));
    const issues = read(doc);
    const here = issues.filter((issue) => formatPath(issue.path).startsWith(at));
    t.ok(
      here.length > 0,
      `${at}: the reader refuses a wrong value there (${issues.map((i) => `${formatPath(i.path)}: ${i.message}`).join('; ')})`,
    );
    t.notOk(check(doc), `${at}: the JSON Schema refuses it too`);
  }
}

t.test('gate.yaml: every declared key is read, and a wrong value is refused by reader and schema alike', async (t) => {
  const base = parse(await readFile(new URL('examples/gate.yaml', root), 'utf8'));
  const full = withValue(
    withValue(
      base,
      ['auth_service', 'join_tokens'],
      [{ token: 'a-long-random-secret-of-16', agents: ['a'], expires: '2026-12-31T00:00:00Z', max_uses: 1 }],
    ),
    ['proxy_service', 'https_keypairs'],
    [{ cert_file: '/etc/gate/tls.crt', key_file: '/etc/gate/tls.key' }],
  );
  // forward_url beside the example's static_version would be refused at the channel, for having both.
  const forwarded = withValue(full, ['proxy_service', 'automatic_upgrades_channels'], {
    'stable/rolling': { forward_url: 'https://updates.example.com/v1' },
  });
  t.same(validateConfig(forwarded, 'test').issues, []);
  checkEveryKeyIsRead(
    t,
    GATE_SCHEMA,
    full,
    (raw) => validateConfig(raw, 'test').issues,
    checkGate,
    (path) => (path.at(-1) === 'forward_url' ? forwarded : full),
  );
  t.same(keysOf(GATE_SCHEMA), ['version', 'data_dir', 'diag_addr', 'diag_token_file', 'auth_service', 'proxy_service', 'cluster']);
});

t.test('agent.yaml: every declared key is read, and a wrong value is refused by reader and schema alike', async (t) => {
  const base = {
    proxy: 'gate.example.com:443',
    name: 'n1',
    allow: ['10.0.0.1:22'],
    resources: [{ kind: 'db', name: 'orders', target: '10.0.0.5:5432', public_addr: 'orders.example.com' }],
    updater: { channel: 'default', package_manager: 'apt' },
  };
  checkEveryKeyIsRead(t, AGENT_SCHEMA, base, (raw) => validateAgentConfig(raw).issues, checkAgent);
});

t.test('the schemas never refuse a spelling the readers take', async (t) => {
  const gateFiles = [
    'proxy_service:\n  proxy_protocol: on\n',
    'proxy_service:\n  proxy_protocol: true\n  proxy_protocol_trusted_networks: [10.0.0.0/8, 192.0.2.1]\n',
    'proxy_service:\n  high_water: 0.8\n  source_share: " 10% "\n  detect_timeout: 1m30s\n  idle_timeout: 0\n',
    'proxy_service:\n  idle_timeout: "0"\n  connection_upgrade_ping_interval: 1.5s\n',
    'proxy_service:\n  web_headers_timeout: 100ms\n  web_request_timeout: 10m\n',
    'auth_service:\nproxy_service:\ncluster:\n',
    'proxy_service:\n  public_addr: [a.example.com, "b.example.com:443"]\n  upstreams:\n',
    'proxy_service:\n  cluster_maintenance_config:\n    agent_upgrades: {utc_start_hour: 0, weekdays:}\n',
    'proxy_service:\n  automatic_upgrades_channels:\n    stable/rolling: {forward_url: "https://u.example.com/v1"}\n    default: {static_version: 1.2.3, critical: true}\n',
    'auth_service:\n  join_tokens: [{token: "0123456789abcdef", agents: one-agent}]\n  revoked_agent_certificates: ["5F:3A:01"]\n',
    '',
  ];
  for (const text of gateFiles) {
    const raw = parse(text) ?? undefined;
    t.same(validateConfig(raw, 'test').issues, [], `the reader takes ${JSON.stringify(text)}`);
    t.ok(checkGate(raw ?? null), `the schema takes ${JSON.stringify(text)}: ${ajv.errorsText(checkGate.errors)}`);
  }
  const agentFiles = [
    'proxy: a:1\nname: n\ntoken:\nallow:\nresources:\nupdater:\n',
    'proxy: a:1\nname: n\nca_pin: " SHA256:' +
      'AB'.repeat(32) +
      '"\ndial_timeout: 1.5s\nresources:\n  - {kind: app, name: x, target: b:2, public_addr: [x.example.com]}\n',
  ];
  for (const text of agentFiles) {
    const raw = parse(text);
    t.same(validateAgentConfig(raw).issues, [], `the reader takes ${JSON.stringify(text)}`);
    t.ok(checkAgent(raw), `the schema takes ${JSON.stringify(text)}: ${ajv.errorsText(checkAgent.errors)}`);
  }
});

/** The node at a key path of a declaration (`'*'`: a list item or a named mapping's value). */
function nodeAt(root: SchemaNode, path: string[]): SchemaNode {
  let node = root;
  for (const step of path) {
    const next = step === '*' ? (node.items ?? (node.additionalProperties as SchemaNode)) : node.properties?.[step];
    if (next === undefined) throw new Error(`no node at ${path.join('.')}`);
    node = next;
  }
  return node;
}

t.test('every default the schemas show is what the readers apply when the key is left out', async (t) => {
  const cases = [
    { name: 'gate.yaml', declaration: GATE_SCHEMA, base: {} as unknown, read: (raw: unknown) => validateConfig(raw, 'test').config },
    {
      name: 'agent.yaml',
      declaration: AGENT_SCHEMA,
      base: { proxy: 'a:1', name: 'n', allow: ['b:2'] },
      read: (raw: unknown) => validateAgentConfig(raw).value,
    },
  ];
  for (const { name, declaration, base, read } of cases) {
    const withDefaults = keyPaths(declaration).filter((path) => nodeAt(declaration, path).default !== undefined);
    t.ok(withDefaults.length > 0, `${name}: ${withDefaults.length} defaults shown`);
    const absent = read(base);
    t.ok(absent, `${name}: the base reads`);
    for (const path of withDefaults) {
      const shown = nodeAt(declaration, path).default;
      t.same(read(withValue(base, path, shown)), absent, `${name} ${path.join('.')}: ${JSON.stringify(shown)} is the default`);
    }
  }
});
