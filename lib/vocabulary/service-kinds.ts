/** What kinds of service an agent may say it provides (its description, its configuration file). */
export const SERVICE_KINDS = ['db', 'ssh', 'kube', 'app', 'desktop'] as const;
export type ServiceKind = (typeof SERVICE_KINDS)[number];
