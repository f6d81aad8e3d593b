// What one join costs the proxy's event loop in cryptography, forge's pure-JavaScript RSA against
// Node's native crypto (OpenSSL), per operation, on this machine:
//
//   npm run build && node dist/bench/ca-signing.js [count]
//
// - sign: an agent certificate (RSA-2048 CA key, SHA-256), forge's `cert.sign` (how the CA
//   signed before) against `CertificateAuthority.issueFor` (forge lays out the ASN.1, Node signs);
// - verify: a CSR's self-signature, forge's `csr.verify` against `verifyRequest`;
// - hostile: forge verifying one request whose RSA key has a 4,096-bit modulus and a 30,000-bit
//   exponent (a quarter of the one in the report: the time grows with the exponent's length),
//   against `verifyRequest` refusing it.
import forge from 'node-forge';
import { generateKeyPairSync } from 'node:crypto';
import { CertificateAuthority } from '../lib/pki/certificate-authority.js';
import { buildRequest, verifyRequest } from '../lib/pki/certificate-request.js';
import { hostileRsaCsr } from '../test/helpers/hostile-csr.js';

const count = Number(process.argv[2] ?? 200);

function perOperationMs(n: number, run: () => void): number {
  for (let i = 0; i < Math.min(20, n); i++) run(); // warm-up
  const start = process.hrtime.bigint();
  for (let i = 0; i < n; i++) run();
  return Number(process.hrtime.bigint() - start) / 1e6 / n;
}

const ca = CertificateAuthority.create('bench CA');
const caKey = forge.pki.privateKeyFromPem(ca.key) as forge.pki.rsa.PrivateKey;
const caSubject = forge.pki.certificateFromPem(ca.cert).subject.attributes;
const agentKey = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey;
const csr = buildRequest('bench-agent', agentKey);
const checked = verifyRequest(csr);
const forgeCsr = forge.pki.certificationRequestFromPem(csr);

const forgeSign = perOperationMs(count, () => {
  const cert = forge.pki.createCertificate();
  cert.publicKey = forgeCsr.publicKey!;
  cert.serialNumber = '01';
  cert.validity.notBefore = new Date();
  cert.validity.notAfter = new Date(Date.now() + 3_600_000);
  cert.setSubject([{ name: 'commonName', value: 'bench-agent' }]);
  cert.setIssuer(caSubject);
  cert.sign(caKey, forge.md.sha256.create());
});
const nativeSign = perOperationMs(count, () => ca.issueFor(checked.spki, { commonName: 'bench-agent', usage: 'client', ttlMs: 3_600_000 }));
const forgeVerify = perOperationMs(count, () => forge.pki.certificationRequestFromPem(csr).verify());
const nativeVerify = perOperationMs(count, () => verifyRequest(csr));
const hostile = hostileRsaCsr({ modulusBits: 4096, exponentBits: 30_000 });
const forgeHostile = perOperationMs(1, () => {
  try {
    forge.pki.certificationRequestFromPem(hostile).verify();
  } catch (err) {
    if (process.env.DEBUG) console.error(err);
  }
});
const nativeHostile = perOperationMs(count, () => {
  try {
    verifyRequest(hostile);
  } catch {
    // refused by the size cap and the key allow-list
  }
});

const row = (what: string, forgeMs: number, nativeMs: number): string =>
  `| ${what} | ${forgeMs.toFixed(3)} | ${nativeMs.toFixed(3)} | ${(forgeMs / nativeMs).toFixed(0)}× |`;
console.log(`node ${process.version}, ${count} operations each (hostile forge verification: 1)\n`);
console.log('| per operation | forge (ms) | native (ms) | ratio |\n|---|---|---|---|');
console.log(row('sign an agent certificate (RSA-2048 CA)', forgeSign, nativeSign));
console.log(row('verify a CSR (RSA-2048)', forgeVerify, nativeVerify));
console.log(row('a CSR with a 30,000-bit exponent', forgeHostile, nativeHostile));
