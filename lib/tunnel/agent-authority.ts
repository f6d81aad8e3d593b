import { ErrorCodes, GateError } from '../errors.js';
import { componentLogger, type Logger } from '../log.js';
import type { CertificateAuthority } from '../pki/certificate-authority.js';
import { verifyRequestOffThread, type VerifiedRequest } from '../pki/certificate-request.js';
import { admitAgent, type AgentTlsFacts } from './admission.js';
import { isValidAgentName } from '../vocabulary/agent-name.js';
import type { JoinTokens } from './join-tokens.js';

export interface AgentAuthorityOptions {
  ca: CertificateAuthority;
  tokens: JoinTokens;
  /** Lifetime of the certificates it issues. */
  certificateTtlMs: () => number;
  isRevoked: (serial: string) => boolean;
  logger?: Logger;
}

/** What a joining or renewing agent receives. */
export interface IssuedAgentCertificate {
  /** The client certificate (PEM) for the key whose CSR was sent. */
  cert: string;
  /** The cluster CA (PEM): what the agent verifies the proxy's tunnel certificate against. */
  ca: string;
  /** ISO 8601 end of validity; the agent renews at two thirds of the lifetime. */
  expires: string;
}

/**
 * Issues agents' short-lived client certificates from the cluster CA: against a join token the
 * first time, against the current certificate (mutual TLS, no token) to renew. The agent's key
 * stays with the agent; only its CSR, whose self-signature proves possession, comes here. Every
 * refusal is a GateError with its own code and issues nothing; tokens never reach a log line.
 */
export class AgentAuthority {
  private readonly log: Logger;

  constructor(private readonly options: AgentAuthorityOptions) {
    this.log = componentLogger(options.logger, 'agent-authority');
  }

  /**
   * A first certificate for `name`, paid for with `token`. The token is checked first (a digest
   * compared in constant time): a request without a valid one is refused before its CSR is even
   * decoded, so an anonymous client cannot make the proxy do any key or signature work.
   */
  async join(request: { token: unknown; name: unknown; csr: unknown }): Promise<IssuedAgentCertificate> {
    if (typeof request.token !== 'string' || request.token === '')
      throw new GateError(ErrorCodes.JOIN_TOKEN_INVALID, 'no join token given');
    const token = this.options.tokens.check(request.token, typeof request.name === 'string' ? request.name : '');
    const name = this.readName(request.name);
    const checked = await this.checkCsr(this.readCsr(request.csr), name);
    // Counted only once the request proved good: a bad CSR does not use up a single-use token.
    // Synchronous with the check of the limit: two joins racing for a single-use token cannot both count.
    token.redeem();
    const issued = await this.issue(name, checked.spki);
    this.log.info({ agent: name, token: token.label, serial: issued.serial }, 'agent joined');
    return issued.answer;
  }

  /** A fresh certificate for the agent that holds a valid current one (the renew request's TLS). */
  async renew(facts: AgentTlsFacts, request: { csr: unknown }): Promise<IssuedAgentCertificate> {
    const name = this.admitRenewal(facts);
    const checked = await this.checkCsr(this.readCsr(request.csr), name);
    const issued = await this.issue(name, checked.spki);
    this.log.info({ agent: name, serial: issued.serial }, 'agent certificate renewed');
    return issued.answer;
  }

  /**
   * The agent a renewal's TLS client certificate names, or GATE_ERR_JOIN_RENEW_REFUSED: what the
   * renewal endpoint asks before it reads the request body, so without a valid certificate nothing
   * else is looked at.
   */
  admitRenewal(facts: AgentTlsFacts): string {
    try {
      return admitAgent(facts, this.options.isRevoked);
    } catch (err) {
      throw new GateError(ErrorCodes.JOIN_RENEW_REFUSED, `renewal needs a valid agent certificate: ${(err as Error).message}`, {
        cause: err,
      });
    }
  }

  private readName(name: unknown): string {
    if (typeof name !== 'string' || !isValidAgentName(name)) {
      throw new GateError(ErrorCodes.JOIN_NAME_NOT_ALLOWED, 'the agent name must be letters, digits, ".", "_" or "-"');
    }
    return name;
  }

  private readCsr(csr: unknown): string {
    if (typeof csr !== 'string') throw new GateError(ErrorCodes.JOIN_CSR_INVALID, 'no certificate request (csr) given');
    return csr;
  }

  /** The request checked (bounded parse and key allow-list here, the signature on the thread pool) and naming `name`. */
  private async checkCsr(csr: string, name: string): Promise<VerifiedRequest> {
    const checked = await verifyRequestOffThread(csr);
    if (checked.commonName !== name) {
      throw new GateError(
        ErrorCodes.JOIN_CSR_NAME_MISMATCH,
        `the certificate request names ${JSON.stringify(checked.commonName ?? '')}, not ${JSON.stringify(name)}`,
      );
    }
    return checked;
  }

  private async issue(name: string, spki: Buffer): Promise<{ answer: IssuedAgentCertificate; serial: string }> {
    const ttlMs = this.options.certificateTtlMs();
    // A short life tolerates less skew: an hour of backdating would put a 1 h certificate's
    // renewal point (two thirds of its validity) at the moment it is issued.
    const backdateMs = Math.min(5 * 60_000, Math.floor(ttlMs / 4));
    const issued = await this.options.ca.issueForOffThread(spki, { commonName: name, usage: 'client', ttlMs, backdateMs });
    return { answer: { cert: issued.cert, ca: this.options.ca.cert, expires: issued.notAfter.toISOString() }, serial: issued.serial };
  }
}
