/**
 * The manifests `gate-mux create` takes: one or more YAML documents, each a
 * `cluster_maintenance_config`, a `role`, an `autoupdate_config` or an `autoupdate_version` (the
 * platform's shapes; the last two are read in rollout-spec.ts). Read as the configuration file
 * is (lib/config/validate.ts): every problem is collected with its key path, not just the first,
 * so one edit fixes a file; a set with any problem is refused whole. Pure.
 */
import { parseAllDocuments } from 'yaml';
import { describe, formatPath, type PathSegment } from '../config/checker.js';
import { parseWeekday, WEEKDAY_NAMES, type MaintenanceConfig, type Weekday } from '../config/maintenance-schedule.js';
import { nearestKey } from '../config/suggest.js';
import { readAutoupdateConfig, readAutoupdateVersion } from './rollout-spec.js';
import {
  AUTOUPDATE_CONFIG_KIND,
  AUTOUPDATE_ROLLOUT_KIND,
  AUTOUPDATE_VERSION_KIND,
  isValidResourceName,
  MAINTENANCE_KIND,
  MAINTENANCE_NAME,
  RESOURCE_KINDS,
  ROLE_KIND,
  ROLE_VERSION,
  USER_KIND,
  VERBS,
} from './resource-kinds.js';

/** A manifest that passed: what is stored (normalised: weekdays spelled out, defaults written). */
export interface ValidManifest {
  kind: string;
  name: string;
  document: Record<string, unknown>;
}

export interface ManifestsRead {
  manifests: ValidManifest[];
  /** `<key path>: <what is wrong>`, prefixed `document N: ` when the file holds several. */
  issues: string[];
}

/** One role rule, as stored. */
export interface RoleRule {
  resources: string[];
  verbs: string[];
}

/** More documents than this in one request is not a manifest. */
export const MAX_DOCUMENTS = 100;

function isMap(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export class Issues {
  readonly list: string[] = [];
  constructor(private readonly prefix: string) {}

  fail(path: PathSegment[], message: string): undefined {
    this.list.push(`${this.prefix}${formatPath(path)}: ${message}`);
    return undefined;
  }

  /** Unknown keys are errors (a field this version ignores could be one the operator relies on); a near miss gets a hint. */
  keys(map: Record<string, unknown>, known: readonly string[], path: PathSegment[]): void {
    for (const key of Object.keys(map)) {
      if (known.includes(key)) continue;
      const near = nearestKey(key, known);
      this.fail([...path, key], near ? `unknown key (did you mean "${near}"?)` : `unknown key; expected one of: ${known.join(', ')}`);
    }
  }

  map(value: unknown, path: PathSegment[]): Record<string, unknown> | undefined {
    if (isMap(value)) return value;
    return this.fail(path, value === undefined ? 'required' : `expected a mapping, got ${describe(value)}`);
  }

  /** The one key a mapping at `path` may hold, itself a mapping. */
  child(map: Record<string, unknown>, key: string, path: PathSegment[]): Record<string, unknown> | undefined {
    this.keys(map, [key], path);
    return this.map(map[key], [...path, key]);
  }

  /** A non-empty list of strings, each checked by `allowed`. */
  strings(value: unknown, path: PathSegment[], allowed: readonly string[]): string[] | undefined {
    if (!Array.isArray(value) || value.length === 0) return this.fail(path, `expected a non-empty list of ${allowed.join(', ')}`);
    const out: string[] = [];
    let ok = true;
    for (const [i, entry] of value.entries()) {
      if (typeof entry === 'string' && allowed.includes(entry)) out.push(entry);
      else {
        ok = false;
        this.fail([...path, i], `${describe(entry)} is not one of ${allowed.join(', ')}`);
      }
    }
    return ok ? out : undefined;
  }
}

/** `metadata.name` of a singleton: optional, and when given the one name. */
function singletonName(c: Issues, doc: Record<string, unknown>, name: string): void {
  if (doc.metadata === undefined) return;
  const metadata = c.map(doc.metadata, ['metadata']);
  if (!metadata) return;
  c.keys(metadata, ['name'], ['metadata']);
  if (metadata.name !== undefined && metadata.name !== name)
    c.fail(['metadata', 'name'], `expected ${name} (there is one per cluster), got ${describe(metadata.name)}`);
}

function readMaintenance(c: Issues, doc: Record<string, unknown>): ValidManifest | undefined {
  c.keys(doc, ['kind', 'version', 'metadata', 'spec'], []);
  if (doc.version !== undefined && doc.version !== 'v1') c.fail(['version'], `expected v1, got ${describe(doc.version)}`);
  singletonName(c, doc, MAINTENANCE_NAME);
  const spec = c.map(doc.spec, ['spec']);
  const upgrades = spec && c.child(spec, 'agent_upgrades', ['spec']);
  if (!upgrades) return undefined;
  const path = ['spec', 'agent_upgrades'];
  const before = c.list.length;
  c.keys(upgrades, ['utc_start_hour', 'weekdays'], path);
  const hour = upgrades.utc_start_hour;
  if (hour === undefined) c.fail([...path, 'utc_start_hour'], 'required: the hour (UTC, 0–23) the one-hour window starts');
  else if (typeof hour !== 'number' || !Number.isInteger(hour) || hour < 0 || hour > 23)
    c.fail([...path, 'utc_start_hour'], `${typeof hour === 'number' ? hour : describe(hour)} is not an hour 0–23`);
  const days = new Set<Weekday>();
  const raw = upgrades.weekdays ?? [];
  if (!Array.isArray(raw)) c.fail([...path, 'weekdays'], `expected a list of day names, got ${describe(raw)}`);
  else
    for (const [i, entry] of raw.entries()) {
      const day = typeof entry === 'string' ? parseWeekday(entry) : undefined;
      if (day === undefined) c.fail([...path, 'weekdays', i], `${describe(entry)} is not a day name (Sun..Sat or Sunday..Saturday)`);
      else days.add(day);
    }
  if (c.list.length > before) return undefined;
  // No weekday, or an empty list: every day (as the proxy's configuration file reads it).
  const weekdays = days.size === 0 ? [0, 1, 2, 3, 4, 5, 6] : [...days].sort((a, b) => a - b);
  return {
    kind: MAINTENANCE_KIND,
    name: MAINTENANCE_NAME,
    document: {
      kind: MAINTENANCE_KIND,
      version: 'v1',
      metadata: { name: MAINTENANCE_NAME },
      spec: { agent_upgrades: { utc_start_hour: hour, weekdays: weekdays.map((d) => WEEKDAY_NAMES[d]) } },
    },
  };
}

function readRole(c: Issues, doc: Record<string, unknown>): ValidManifest | undefined {
  const before = c.list.length;
  c.keys(doc, ['kind', 'version', 'metadata', 'spec'], []);
  if (doc.version !== ROLE_VERSION)
    c.fail(['version'], doc.version === undefined ? `required: ${ROLE_VERSION}` : `expected ${ROLE_VERSION}, got ${describe(doc.version)}`);
  const metadata = c.map(doc.metadata, ['metadata']);
  let name: string | undefined;
  if (metadata) {
    c.keys(metadata, ['name', 'description'], ['metadata']);
    if (typeof metadata.name === 'string' && isValidResourceName(metadata.name)) name = metadata.name;
    else c.fail(['metadata', 'name'], `expected a role name (letters, digits, ".", "_", "-"), got ${describe(metadata.name)}`);
    if (metadata.description !== undefined && typeof metadata.description !== 'string')
      c.fail(['metadata', 'description'], `expected text, got ${describe(metadata.description)}`);
  }
  const spec = c.map(doc.spec, ['spec']);
  const allow = spec && c.child(spec, 'allow', ['spec']);
  const rules: RoleRule[] = [];
  if (allow) {
    c.keys(allow, ['rules'], ['spec', 'allow']);
    const raw = allow.rules ?? [];
    if (!Array.isArray(raw)) c.fail(['spec', 'allow', 'rules'], `expected a list of rules, got ${describe(raw)}`);
    else
      for (const [i, entry] of raw.entries()) {
        const path = ['spec', 'allow', 'rules', i];
        const rule = c.map(entry, path);
        if (!rule) continue;
        c.keys(rule, ['resources', 'verbs'], path);
        const resources = c.strings(rule.resources, [...path, 'resources'], [...RESOURCE_KINDS, '*']);
        const verbs = c.strings(rule.verbs, [...path, 'verbs'], [...VERBS, '*']);
        if (resources && verbs) rules.push({ resources: [...new Set(resources)], verbs: [...new Set(verbs)] });
      }
  }
  if (c.list.length > before || name === undefined) return undefined;
  return {
    kind: ROLE_KIND,
    name,
    document: {
      kind: ROLE_KIND,
      version: ROLE_VERSION,
      metadata: { name, ...(typeof metadata?.description === 'string' ? { description: metadata.description } : {}) },
      spec: { allow: { rules } },
    },
  };
}

/** Reads every document of `text`; `manifests` is empty whenever `issues` is not. */
export function readManifests(text: string): ManifestsRead {
  const documents = parseAllDocuments(text);
  const list = Array.isArray(documents) ? documents : [documents];
  const issues: string[] = [];
  const manifests: ValidManifest[] = [];
  const nonEmpty = list.filter((d) => d.contents !== null || d.errors.length > 0);
  if (nonEmpty.length === 0) return { manifests: [], issues: ['(document): empty: expected a manifest with a kind'] };
  if (nonEmpty.length > MAX_DOCUMENTS)
    return { manifests: [], issues: [`(document): ${nonEmpty.length} documents; at most ${MAX_DOCUMENTS}`] };
  for (const [i, parsed] of nonEmpty.entries()) {
    const c = new Issues(nonEmpty.length > 1 ? `document ${i + 1}: ` : '');
    if (parsed.errors.length > 0) {
      c.fail([], `not YAML: ${parsed.errors[0]!.message.split('\n')[0]}`);
      issues.push(...c.list);
      continue;
    }
    const doc: unknown = parsed.toJS({ maxAliasCount: 100 });
    const read = readOne(c, doc);
    issues.push(...c.list);
    if (read) manifests.push(read);
  }
  return issues.length > 0 ? { manifests: [], issues } : { manifests, issues };
}

const WRITABLE_KINDS = `${MAINTENANCE_KIND}, ${ROLE_KIND}, ${AUTOUPDATE_CONFIG_KIND} or ${AUTOUPDATE_VERSION_KIND}`;

function readOne(c: Issues, doc: unknown): ValidManifest | undefined {
  if (!isMap(doc)) return c.fail([], `expected a manifest (a mapping with kind), got ${describe(doc)}`);
  if (doc.kind === undefined) return c.fail(['kind'], `required: ${WRITABLE_KINDS}`);
  if (doc.kind === MAINTENANCE_KIND) return readMaintenance(c, doc);
  if (doc.kind === ROLE_KIND) return readRole(c, doc);
  if (doc.kind === AUTOUPDATE_CONFIG_KIND) return readAutoupdateConfig(c, doc);
  if (doc.kind === AUTOUPDATE_VERSION_KIND) return readAutoupdateVersion(c, doc);
  if (doc.kind === USER_KIND) return c.fail(['kind'], 'users are made with gate-mux users add (which issues their identity file)');
  if (doc.kind === AUTOUPDATE_ROLLOUT_KIND)
    return c.fail(
      ['kind'],
      'the rollout state is written by the cluster (gate-mux autoupdate agents start-update, mark-done, rollback change it)',
    );
  return c.fail(['kind'], `expected ${WRITABLE_KINDS}, got ${describe(doc.kind)}`);
}

/** The schedule a stored `cluster_maintenance_config` document holds (it was validated when written). Pure. */
export function maintenanceOf(document: Record<string, unknown>): MaintenanceConfig | undefined {
  const spec = document.spec as { agent_upgrades?: { utc_start_hour?: unknown; weekdays?: unknown } } | undefined;
  const upgrades = spec?.agent_upgrades;
  const hour = upgrades?.utc_start_hour;
  if (typeof hour !== 'number' || !Array.isArray(upgrades?.weekdays)) return undefined;
  const weekdays = (upgrades.weekdays as unknown[]).map((d) => (typeof d === 'string' ? parseWeekday(d) : undefined));
  if (weekdays.some((d) => d === undefined) || weekdays.length === 0) return undefined;
  return { utcStartHour: hour, weekdays: weekdays as Weekday[] };
}

/** The rules a stored role document holds. Pure. */
export function rulesOf(document: Record<string, unknown>): RoleRule[] {
  const rules = (document.spec as { allow?: { rules?: unknown } } | undefined)?.allow?.rules;
  if (!Array.isArray(rules)) return [];
  return rules.filter((r): r is RoleRule => isMap(r) && Array.isArray(r.resources) && Array.isArray(r.verbs));
}
