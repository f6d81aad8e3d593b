import { X509Certificate } from 'node:crypto';
import { chmod, mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ErrorCodes, GateError } from '../errors.js';
import { agentNameOf, commonNameOfSubject } from './agent-identity.js';
import type { AgentIdentity } from './join-client.js';

const FILES = { key: 'agent-key.pem', cert: 'agent.pem', ca: 'ca.pem' } as const;

/** The agent's identity as kept in its state directory, or undefined when it has none yet. */
export interface StoredIdentity extends AgentIdentity {
  /** The name its certificate carries. */
  name: string;
  /** Epoch milliseconds the certificate stops being valid. */
  expiresAt: number;
}

/**
 * Reads the key, certificate and CA an agent keeps in `dir` (undefined when any is missing, as at
 * first start). GATE_ERR_AGENT_STATE when they are there but unreadable as PEM.
 */
export async function readAgentState(dir: string): Promise<StoredIdentity | undefined> {
  let texts: string[];
  try {
    texts = await Promise.all([FILES.key, FILES.cert, FILES.ca].map((f) => readFile(join(dir, f), 'utf8')));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new GateError(ErrorCodes.AGENT_STATE, `cannot read the agent state in ${dir}: ${(err as Error).message}`, { cause: err });
  }
  const [key, cert, ca] = texts as [string, string, string];
  try {
    const x509 = new X509Certificate(cert);
    const name = agentNameOf({ commonName: commonNameOfSubject(x509.subject), subjectAltName: x509.subjectAltName });
    return { key, cert, ca, name, expiresAt: Date.parse(x509.validTo) };
  } catch (err) {
    throw new GateError(ErrorCodes.AGENT_STATE, `the certificate in ${dir} is unreadable: ${(err as Error).message}`, { cause: err });
  }
}

/**
 * Writes an identity into `dir` (made 0700), each file 0600 and replaced by rename, so a crash
 * mid-write leaves the previous key and certificate, never half of each.
 */
export async function writeAgentState(dir: string, identity: AgentIdentity): Promise<void> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  await chmod(dir, 0o700);
  for (const [field, file] of Object.entries(FILES) as Array<[keyof typeof FILES, string]>) {
    const path = join(dir, file);
    await writeFile(`${path}.tmp`, identity[field], { mode: 0o600 });
    await rename(`${path}.tmp`, path);
    await chmod(path, 0o600);
  }
}
