// What a pod of a rendered chart would see, worked out from the render alone: the environment of a container (values
// from its env entries, Secret references resolved from the render's own Secrets or from stand-ins for Secrets the
// operator manages, the Pod IP) and the taskgate config its ConfigMap holds.
import { parse } from 'yaml';
import type { K8sObject } from './k8s-schemas.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- rendered YAML, read by path

export const POD_IP = '10.0.3.7';

/** Secrets of the render, by name: key -> decoded value. */
function renderedSecrets(objects: K8sObject[]): Map<string, Record<string, string>> {
  return new Map(
    objects
      .filter((o) => o.kind === 'Secret')
      .map((o) => [o.metadata.name, Object.fromEntries(Object.entries((o as Json).data ?? {}).map(([k, v]) => [k, Buffer.from(String(v), 'base64').toString()]))]),
  );
}

/**
 * The env of the first container of `pod` (a pod spec). `external` stands in for Secrets the operator manages:
 * "secret/key" -> value; a reference to neither fails loudly (the pod would not start). envFrom entries are external.
 */
export function containerEnv(objects: K8sObject[], pod: Json, external: Record<string, string> = {}): Record<string, string> {
  const secrets = renderedSecrets(objects);
  const env: Record<string, string> = {};
  for (const source of pod.containers[0].envFrom ?? []) {
    const name = source.secretRef?.name ?? source.configMapRef?.name;
    for (const [ref, value] of Object.entries(external)) if (ref.startsWith(`${name}/`)) env[ref.slice(name.length + 1)] = value;
  }
  for (const entry of pod.containers[0].env ?? []) {
    if (entry.value !== undefined) env[entry.name] = String(entry.value);
    else if (entry.valueFrom?.fieldRef?.fieldPath === 'status.podIP') env[entry.name] = POD_IP;
    else if (entry.valueFrom?.secretKeyRef !== undefined) {
      const { name, key } = entry.valueFrom.secretKeyRef;
      const value = secrets.get(name)?.[key] ?? external[`${name}/${key}`];
      if (value === undefined) throw new Error(`${entry.name}: Secret ${name}, key ${key} is neither rendered nor given`);
      env[entry.name] = value;
    } else throw new Error(`${entry.name}: an env source the test does not know`);
  }
  return env;
}

export const gatewayPod = (objects: K8sObject[]): Json => (objects.find((o) => o.kind === 'Deployment') as Json).spec.template.spec;
export const testPod = (objects: K8sObject[]): Json => (objects.find((o) => o.kind === 'Pod') as Json).spec;

/** The taskgate config the chart's ConfigMap holds, as text. */
export function renderedConfigText(objects: K8sObject[]): string {
  const deployment = objects.find((o) => o.kind === 'Deployment') as Json;
  const volume = deployment.spec.template.spec.volumes.find((v: Json) => v.name === 'config');
  const configMap = objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name === volume.configMap.name) as Json;
  return configMap.data['taskgate.yaml'];
}

export const renderedConfig = (objects: K8sObject[]): Json => parse(renderedConfigText(objects));
