/** What kinds of service an agent may say it provides (its description, its configuration file). */
// The union is spelled out rather than derived with `typeof`, so the public type does not name
// this list (internal only, issue 39); `satisfies` and the statement below keep the two the same.
export type ServiceKind = 'db' | 'ssh' | 'kube' | 'app' | 'desktop';
export const SERVICE_KINDS = ['db', 'ssh', 'kube', 'app', 'desktop'] as const satisfies readonly ServiceKind[];
true satisfies [ServiceKind] extends [(typeof SERVICE_KINDS)[number]] ? true : never;
