/** PEM (RFC 7468) to DER and back, for one labelled block; pure. */

const BASE64_BODY = /^[A-Za-z0-9+/=\s]*$/;

/**
 * The DER bytes of the first `-----BEGIN <label>-----` block in `pem` (also `NEW <label>`, which
 * older tools write for requests); undefined when there is none or its body is not base64.
 */
export function pemToDer(pem: string, label: string): Buffer | undefined {
  for (const name of [label, `NEW ${label}`]) {
    const begin = `-----BEGIN ${name}-----`;
    const end = `-----END ${name}-----`;
    const from = pem.indexOf(begin);
    if (from < 0) continue;
    const to = pem.indexOf(end, from + begin.length);
    if (to < 0) return undefined;
    const body = pem.slice(from + begin.length, to);
    if (!BASE64_BODY.test(body)) return undefined;
    const der = Buffer.from(body.replace(/\s+/g, ''), 'base64');
    return der.length > 0 ? der : undefined;
  }
  return undefined;
}

/** `der` as a PEM block with `label`, 64 characters a line. */
export function derToPem(label: string, der: Buffer): string {
  const lines = der.toString('base64').match(/.{1,64}/g) ?? [];
  return `-----BEGIN ${label}-----\n${lines.join('\n')}\n-----END ${label}-----\n`;
}
