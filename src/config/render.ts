// The effective config as YAML for `taskgate check-config`: what the gateway will actually run with, defaults
// filled in, secrets hidden. The first document is itself a valid config file (upstreams keyed by name again).
import { stringify } from 'yaml';
import { mergePolicy } from './policy.js';
import type { IdentityConfig, UpstreamAuthConfig } from './identity.js';
import type { AuthConfig, GatewayConfig, RedisAccessConfig, StoreConfig, UpstreamConfig, WebhookConfig } from './types.js';

export const REDACTED = '[redacted]';
const SECRET_PARAM = /(token|key|secret|password|passwd|auth|signature|sig)/i;

/** Hides a URL's password and the values of query parameters that look like credentials. */
export function redactUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return value;
  }
  if (url.password === '' && ![...url.searchParams.keys()].some((k) => SECRET_PARAM.test(k))) return value;
  const auth = url.username !== '' || url.password !== '' ? `${url.username}${url.password !== '' ? `:${REDACTED}` : ''}@` : '';
  const query = [...url.searchParams.entries()]
    .map(([k, v]) => `${encodeURIComponent(k)}=${SECRET_PARAM.test(k) ? REDACTED : encodeURIComponent(v)}`)
    .join('&');
  return `${url.protocol}//${auth}${url.host}${url.pathname}${query !== '' ? `?${query}` : ''}${url.hash}`;
}

const redactValues = (map: Readonly<Record<string, string>>): Record<string, string> =>
  Object.fromEntries(Object.keys(map).map((k) => [k, REDACTED]));

function upstreamEntry(u: UpstreamConfig): Record<string, unknown> {
  const { name: _name, auth, ...rest } = u;
  const authEntry = auth === undefined ? {} : { auth: upstreamAuthEntry(auth) };
  if (rest.transport === 'stdio') return { ...rest, env: redactValues(rest.env), ...authEntry };
  return { ...rest, url: redactUrl(rest.url), headers: redactValues(rest.headers), ...authEntry };
}

/** Client secrets hidden; the token endpoint may carry credentials in its query like any URL. */
function upstreamAuthEntry(auth: UpstreamAuthConfig): Record<string, unknown> {
  const client = <T extends { clientSecret: string; tokenUrl?: string | undefined }>(c: T | undefined) =>
    c === undefined ? undefined : { ...c, clientSecret: REDACTED, tokenUrl: c.tokenUrl === undefined ? undefined : redactUrl(c.tokenUrl) };
  const code = auth.authorizationCode;
  return {
    ...auth,
    clientCredentials: client(auth.clientCredentials),
    tokenExchange: client(auth.tokenExchange),
    authorizationCode: code?.clientSecret === undefined ? code : { ...code, clientSecret: REDACTED },
  };
}

/** Key ids and algorithms stay (an operator checks rotation with them); key material never shows. */
function identityEntry(identity: IdentityConfig): Record<string, unknown> {
  return {
    issuer: identity.issuer,
    keys: identity.keys.map((k) => ({ ...k, privateKey: REDACTED })),
    sealingKeys: identity.sealingKeys.map((k) => ({ ...k, key: REDACTED })),
  };
}

/** A webhook's secret hidden; its URL may carry credentials in its query like any URL. */
function webhookEntry(webhook: WebhookConfig): Record<string, unknown> {
  return { ...webhook, url: redactUrl(webhook.url), secret: REDACTED };
}

/** A Sentinel's or Cluster's options with passwords and TLS private material hidden. */
function redisAccessEntry(access: RedisAccessConfig): Record<string, unknown> {
  const hidden: Record<string, unknown> = { ...access };
  for (const field of ['password', 'sentinelPassword']) if (hidden[field] !== undefined) hidden[field] = REDACTED;
  if (typeof access.tls === 'object') hidden.tls = Object.fromEntries(Object.entries(access.tls).map(([k, v]) => [k, /^(key|pfx|passphrase)$/.test(k) ? REDACTED : v]));
  return hidden;
}

function storeEntry(store: StoreConfig): Record<string, unknown> {
  if (store.type !== 'redis') return { ...store };
  const { sentinel, cluster, ...rest } = store;
  return {
    ...rest,
    url: redactUrl(rest.url),
    ...(sentinel === undefined ? {} : { sentinel: redisAccessEntry(sentinel) }),
    ...(cluster === undefined ? {} : { cluster: redisAccessEntry(cluster) }),
  };
}

/** The front door's login client keeps its id; its secret never shows. */
function oauthEntry(oauth: NonNullable<AuthConfig['oauth']>): Record<string, unknown> {
  const { login } = oauth;
  return { ...oauth, login: login?.clientSecret === undefined ? login : { ...login, clientSecret: REDACTED } };
}

function authEntry(auth: AuthConfig): Record<string, unknown> {
  const { oauth, access, ...rest } = auth;
  return {
    ...rest,
    ...(oauth === undefined ? {} : { oauth: Object.fromEntries(Object.entries(oauthEntry(oauth)).filter(([, v]) => v !== undefined)) }),
    ...(access === undefined ? {} : { access }),
  };
}

/** The effective config (first YAML document) and the effective task policy per rule (second document). */
export function renderEffectiveConfig(config: GatewayConfig): string {
  const effective = {
    listen: config.listen,
    store: storeEntry(config.store),
    upstreams: Object.fromEntries(config.upstreams.map((u) => [u.name, upstreamEntry(u)])),
    tasks: config.tasks,
    sessions: config.sessions,
    sse: config.sse,
    mrtr: config.mrtr,
    replicas: config.replicas,
    log: config.log,
    // API keys appear as their hashes (the form the file may hold too); a hash does not let anyone in.
    ...(config.auth === undefined ? {} : { auth: authEntry(config.auth) }),
    ...(config.identity === undefined ? {} : { identity: identityEntry(config.identity) }),
    ...(config.webhooks.length === 0 ? {} : { webhooks: config.webhooks.map(webhookEntry) }),
    webhookDelivery: config.webhookDelivery,
    shutdownTimeoutMs: config.shutdownTimeoutMs,
  };
  const policy = {
    taskPolicy: {
      defaults: config.tasks.defaults,
      rules: config.tasks.rules.map((rule) => ({ match: rule.match, ...mergePolicy(config.tasks.defaults, rule) })),
    },
  };
  return [
    `# taskgate effective configuration (defaults applied, secrets ${REDACTED})`,
    `# source: ${config.source}`,
    toYaml(effective).trimEnd(),
    '---',
    '# Effective task policy: a tool gets the first rule whose `match` glob matches its exposed name',
    '# (prefix included), with the rule\'s fields laid over the defaults; tools matching no rule get the defaults.',
    toYaml(policy).trimEnd(),
    '',
  ].join('\n');
}

/**
 * YAML for a person to read: values written out where they repeat (the yaml library would print a shared
 * object once and `*a1` after, which says nothing to an operator) and no folded lines.
 */
export function toYaml(value: unknown): string {
  return stringify(value, { lineWidth: 0, aliasDuplicateObjects: false });
}
