// Validates rendered Kubernetes objects against the API's own schemas, as the API server would: the kubernetes-models
// packages (core, Prometheus Operator, Gateway API) carry each kind's OpenAPI schema compiled into a validator. Those
// validators accept unknown fields (the Kubernetes schemas have no additionalProperties: false), which the API server
// rejects (strict field validation) or silently drops: so each object is validated through a Proxy that records which
// fields the validator looked at. The compiled validator reads every property its schema declares (present or not)
// and enumerates the keys of maps (labels, data), so a key it neither read nor enumerated is one the schema lacks.
import { Model } from '@kubernetes-models/base';

export type K8sObject = { apiVersion: string; kind: string; metadata: { name: string; [k: string]: unknown }; [k: string]: unknown };

/** The models module of an apiVersion: its group's package and the version's folder. */
function modelsModule(apiVersion: string): string {
  const [group, version] = apiVersion.includes('/') ? apiVersion.split('/') : ['', apiVersion];
  if (group === 'monitoring.coreos.com') return `@kubernetes-models/prometheus-operator/${group}/${version}`;
  if (group === 'gateway.networking.k8s.io') return `@kubernetes-models/gateway-api/${group}/${version}`;
  return group === '' ? `kubernetes-models/${version}` : `kubernetes-models/${group}/${version}`;
}

async function modelOf(object: K8sObject): Promise<typeof Model> {
  const models = (await import(modelsModule(object.apiVersion))) as Record<string, unknown>;
  const model = models[object.kind];
  if (typeof model !== 'function') throw new Error(`no model for ${object.apiVersion} ${object.kind}`);
  return model as typeof Model;
}

interface Seen {
  read: Set<PropertyKey>;
  enumerated: boolean;
}

/** `value` behind proxies that record, per object, the keys read and whether its keys were listed. */
function watched(value: unknown, path: string, seen: Map<string, { object: Record<string, unknown>; seen: Seen }>): unknown {
  if (value === null || typeof value !== 'object') return value;
  const record: Seen = { read: new Set(), enumerated: false };
  if (!Array.isArray(value)) seen.set(path, { object: value as Record<string, unknown>, seen: record });
  const children = new Map<PropertyKey, unknown>();
  return new Proxy(value as object, {
    get(target, key, receiver) {
      record.read.add(key);
      const inner = Reflect.get(target, key, receiver) as unknown;
      if (typeof key !== 'string' || inner === null || typeof inner !== 'object') return inner;
      if (!children.has(key)) children.set(key, watched(inner, Array.isArray(target) ? `${path}[${key}]` : `${path}.${key}`, seen));
      return children.get(key);
    },
    ownKeys(target) {
      record.enumerated = true;
      return Reflect.ownKeys(target);
    },
    has(target, key) {
      record.read.add(key);
      return Reflect.has(target, key);
    },
  });
}

/** The fields of `object` its kind's schema does not declare ("<kind>/<name>: .spec.foo"). */
function unknownFields(seen: Map<string, { object: Record<string, unknown>; seen: Seen }>): string[] {
  const unknown: string[] = [];
  for (const [path, { object, seen: record }] of seen) {
    // Nothing read, nothing listed: a free-form object (preserve-unknown-fields), or one the validator never reached.
    if (record.enumerated || record.read.size === 0) continue;
    for (const key of Object.keys(object)) if (!record.read.has(key)) unknown.push(`${path}.${key}`);
  }
  return unknown;
}

/** Problems of one object: what its schema rejects, and fields it does not know. Empty: valid. */
export async function schemaProblems(object: K8sObject): Promise<string[]> {
  const model = await modelOf(object);
  const seen = new Map<string, { object: Record<string, unknown>; seen: Seen }>();
  const where = `${object.kind}/${object.metadata.name}`;
  try {
    model.prototype.validate.call(watched(object, '', seen));
  } catch (error) {
    return [`${where}: ${(error as Error).message}`];
  }
  return unknownFields(seen).map((path) => `${where}: unknown field ${path}`);
}
