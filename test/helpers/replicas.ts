// Two gateway replicas of one config on one store: the smallest deployment of several replicas, in-process or as
// processes. Without a `store` in the config they share the test Redis under a prefix of their own, deleted when
// the scope closes (after both replicas have).
import type { GatewayChild } from '../fixtures/spawn.js';
import type { Json, TestGateway, TestScope } from './harness.js';
import { sharedRedisStore } from './shared-redis.js';

function onOneStore(scope: TestScope, config: Json, name: string): Json {
  return { ...config, store: config.store ?? sharedRedisStore(scope, name) };
}

/** Two in-process gateways of `config`; `name` names the Redis prefix they get when the config has no store. */
export async function twoReplicas(scope: TestScope, config: Json, name = 'replicas'): Promise<[TestGateway, TestGateway]> {
  const both = onOneStore(scope, config, name);
  return [await scope.gateway(both), await scope.gateway(both)];
}

/** Two gateway processes of `config`, as twoReplicas. */
export async function twoReplicaProcesses(scope: TestScope, config: Json, name = 'replicas'): Promise<[GatewayChild, GatewayChild]> {
  const both = onOneStore(scope, config, name);
  return [await scope.spawnGateway({ config: both }), await scope.spawnGateway({ config: both })];
}
