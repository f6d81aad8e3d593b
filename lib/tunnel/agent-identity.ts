import { ErrorCodes, GateError } from '../errors.js';
import { isValidAgentName } from '../vocabulary/agent-name.js';

/** The certificate fields the name comes from (both `PeerCertificate` and `X509Certificate` give them). */
export interface CertificateNames {
  /** Subject common name(s); Node gives an array when the subject repeats CN. */
  commonName: string | string[] | undefined;
  /** `subjectaltname` text as Node prints it: `DNS:a, DNS:b, IP Address:1.2.3.4`. */
  subjectAltName: string | undefined;
}

/**
 * The agent name a certificate carries: its subject CN, else its first DNS subjectAltName.
 * Certificates are issued by the proxy's CA with `commonName: <agent name>`, so the CN is the
 * identity; the SAN fallback is for CAs that leave CN empty (RFC 6125 §2.3 deprecates CN for
 * server names, and some issuers apply that to client certificates too). Pure. Throws
 * GATE_ERR_AGENT_IDENTITY when neither holds a usable name, or the CN is ambiguous.
 */
export function agentNameOf(names: CertificateNames): string {
  const cns = names.commonName === undefined ? [] : Array.isArray(names.commonName) ? names.commonName : [names.commonName];
  if (cns.length > 1)
    throw new GateError(ErrorCodes.AGENT_IDENTITY, `certificate has ${cns.length} common names; an agent needs exactly one`);
  const cn = cns[0];
  if (cn !== undefined && cn !== '') {
    if (!isValidAgentName(cn))
      throw new GateError(
        ErrorCodes.AGENT_IDENTITY,
        `certificate common name ${JSON.stringify(cn.slice(0, 80))} is not a valid agent name`,
      );
    return cn;
  }
  const dns = (names.subjectAltName ?? '')
    .split(',')
    .map((entry) => entry.trim())
    .find((entry) => entry.startsWith('DNS:'));
  const fromSan = dns?.slice(4);
  if (fromSan !== undefined && isValidAgentName(fromSan)) return fromSan;
  throw new GateError(ErrorCodes.AGENT_IDENTITY, 'certificate names no agent: no common name and no usable DNS subjectAltName');
}

/** The CN out of an `X509Certificate#subject` text (`CN=name\nO=org`). */
export function commonNameOfSubject(subject: string): string | string[] | undefined {
  const values = subject
    .split('\n')
    .filter((line) => line.startsWith('CN='))
    .map((line) => line.slice(3));
  return values.length === 0 ? undefined : values.length === 1 ? values[0] : values;
}
