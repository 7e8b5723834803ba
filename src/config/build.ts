// The validated file (RawConfig: upstreams still a map, task rules still partial, API keys as written) -> the
// GatewayConfig the gateway runs with: upstreams in file order with their prefixes, the task defaults complete, the
// task tools named and switched on or off, API keys hashed, and the identity and upstream-auth defaults resolved.
// load.ts freezes the result.
import { hashApiKey } from './api-keys.js';
import { identityConfig, stdioAuthConfig, upstreamAuthConfig } from './identity.js';
import { taskToolsWanted } from './schema/background.js';
import { DEFAULT_POLICY, webhookEndpointId, type RawConfig } from './schema.js';
import type { AuthConfig, GatewayConfig, RateLimitRule, TaskPolicy, TaskRule, TaskToolNames, TaskToolsConfig, UpstreamConfig, WebhookConfig } from './types.js';

/** `order`: the upstreams' names in file order; `source`: where the config came from (for messages). */
export function buildConfig(raw: RawConfig, order: readonly string[], source: string): GatewayConfig {
  const several = order.length > 1;
  const upstreams = order.map((name): UpstreamConfig => {
    const u = raw.upstreams[name];
    if (u === undefined) throw new Error(`unreachable: upstream ${name} vanished`);
    const prefix = u.prefix ?? (several ? `${name}__` : '');
    const common = {
      name, transport: u.transport, prefix, requestTimeoutMs: u.requestTimeoutMs, initializeTimeoutMs: u.initializeTimeoutMs, taskConcurrency: u.taskConcurrency, maxMessageBytes: u.maxMessageBytes, maxSessions: u.maxSessions,
      ...(u.tools !== undefined ? { tools: u.tools } : {}),
      ...(u.prompts !== undefined ? { prompts: u.prompts } : {}),
      ...(u.resources !== undefined ? { resources: u.resources } : {}),
    };
    if (u.transport === 'stdio') {
      return {
        ...common,
        transport: 'stdio',
        command: u.command,
        args: u.args,
        env: u.env,
        ...(u.cwd !== undefined ? { cwd: u.cwd } : {}),
        isolation: u.isolation,
        idleTimeoutMs: u.idleTimeoutMs,
        ...(u.auth !== undefined ? { auth: stdioAuthConfig(u.auth, raw.auth?.oauth?.issuer) } : {}),
        restart: u.restart,
        stopGraceMs: u.stopGraceMs,
      };
    }
    return {
      ...common,
      transport: u.transport,
      url: u.url,
      headers: u.headers,
      ...(u.auth !== undefined ? { auth: upstreamAuthConfig(u.auth, u.url, raw.auth?.oauth?.issuer) } : {}),
      idleTimeoutMs: u.idleTimeoutMs,
      connectTimeoutMs: u.connectTimeoutMs,
      headersTimeoutMs: u.headersTimeoutMs,
      bodyTimeoutMs: u.bodyTimeoutMs,
      protocol: u.protocol,
    };
  });

  // Defaults are complete policies; rules keep only the fields the operator wrote (they override the defaults).
  const defaults: TaskPolicy = { ...DEFAULT_POLICY, ...definedOnly(raw.tasks.defaults) };
  const rules = raw.tasks.rules.map((rule) => definedOnly(rule) as TaskRule);

  return {
    source,
    listen: raw.listen,
    store: raw.store,
    upstreams,
    tasks: {
      defaults,
      rules,
      immediateResponse: raw.tasks.immediateResponse,
      taskTools: taskToolsConfig(raw.tasks.taskTools, defaults, rules),
      maxStoredBytesPerPrincipal: raw.tasks.maxStoredBytesPerPrincipal,
      maxStoredBytes: raw.tasks.maxStoredBytes,
      maxResultBytes: raw.tasks.maxResultBytes,
      maxPendingApprovalsPerPrincipal: raw.tasks.maxPendingApprovalsPerPrincipal,
    },
    sessions: raw.sessions,
    sse: raw.sse,
    mrtr: raw.mrtr,
    lists: raw.lists,
    replicas: raw.replicas,
    log: raw.log,
    metrics: raw.metrics,
    dashboard: raw.dashboard,
    auth: raw.auth === undefined ? undefined : authConfig(raw.auth),
    ...(raw.identity !== undefined ? { identity: identityConfig(raw.identity, raw.auth?.resource, raw.listen) } : {}),
    webhooks: raw.webhooks.map((w) => ({ ...definedOnly(w), id: webhookEndpointId(w) }) as WebhookConfig),
    webhookDelivery: raw.webhookDelivery,
    shutdownTimeoutMs: raw.shutdownTimeoutMs,
  };
}

/** Keys are kept only as their SHA-256 (what a presented token is hashed to and looked up by). */
function authConfig(raw: NonNullable<RawConfig['auth']>): AuthConfig {
  return {
    resource: raw.resource,
    apiKeys: raw.apiKeys.map((k) => ({
      principal: k.principal,
      sha256: k.sha256 !== undefined ? k.sha256.toLowerCase() : hashApiKey(k.key ?? ''),
      scopes: k.scopes,
    })),
    oauth:
      raw.oauth === undefined
        ? undefined
        : {
            issuer: raw.oauth.issuer,
            jwksUri: raw.oauth.jwksUri,
            audience: raw.oauth.audience ?? raw.resource,
            requiredScopes: raw.oauth.requiredScopes,
            clockToleranceSeconds: raw.oauth.clockToleranceSeconds,
            ...(raw.oauth.login !== undefined && { login: raw.oauth.login }),
          },
    access: raw.access,
    rateLimits: { ...raw.rateLimits, rules: raw.rateLimits.rules.map((rule) => definedOnly(rule) as RateLimitRule) },
    admin: raw.admin,
  };
}

/** The task tools' names (prefix, or each one's own) and whether they are on (`auto`: where plain callers need them). */
function taskToolsConfig(raw: RawConfig['tasks']['taskTools'], defaults: TaskPolicy, rules: readonly TaskRule[]): TaskToolsConfig {
  const name = (kind: keyof TaskToolNames): string => raw.names[kind] ?? `${raw.prefix}task_${kind}`;
  return {
    enabled: raw.enabled === 'auto' ? taskToolsWanted(defaults, rules) : raw.enabled,
    names: { result: name('result'), status: name('status'), cancel: name('cancel'), list: name('list'), delete: name('delete') },
    waitSeconds: raw.waitSeconds,
    maxWaitSeconds: raw.maxWaitSeconds,
  };
}

function definedOnly<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}
