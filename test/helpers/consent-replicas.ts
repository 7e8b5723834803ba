// Per-user consent on two gateway processes behind one public origin (issue 41): the fixtures consentSetup starts
// (front-door issuer with a browser login, third-party authorization server, the upstream it protects), two replicas
// of one config on the shared test Redis under a prefix of their own, and in front of them a small reverse proxy at
// the public origin (`listen.publicUrl`, `auth.resource`) that sends each request to the replica a test picks, as a
// load balancer would: a browser then opens a link one replica made and lands, callback included, on the other.
// MCP clients talk to a replica's own port (its `url`), so a test knows which replica holds its session.
import http from 'node:http';
import { Redis } from 'ioredis';
import { LOGIN_COOKIE, startAuthServer, type AuthServer } from '../fixtures/auth-server.js';
import { freePort, spawnGateway, type GatewayChild } from '../fixtures/spawn.js';
import { startThirdPartyAs, type ThirdPartyAs } from '../fixtures/third-party-as.js';
import { startThirdPartyUpstream, type ThirdPartyUpstream } from '../fixtures/third-party-upstream.js';
import { LOGIN_CLIENT, SEALING_KEY } from './consent-gateway.js';
import type { Json, TestScope } from './harness.js';
import { HttpBrowser } from './http-browser.js';
import { sharedRedisStore, TEST_REDIS_URL } from './shared-redis.js';

export type ReplicaName = 'a' | 'b';

export interface ConsentReplicas {
  issuer: AuthServer;
  thirdParty: ThirdPartyAs;
  upstream: ThirdPartyUpstream;
  a: GatewayChild;
  b: GatewayChild;
  /** The public origin (the balancer's): links and redirect URIs are built on it, whatever replica made them. */
  origin: string;
  /** `<origin>/mcp`: `auth.resource`, the audience of the users' access tokens. */
  resource: string;
  /** The Redis key prefix both replicas use. */
  prefix: string;
  /** Sends the balancer's next requests to replica `to`. */
  route(to: ReplicaName): void;
  /** Requests the balancer forwarded, per replica. */
  forwarded(): Record<ReplicaName, number>;
  tokenFor(user: string): Promise<string>;
  /** A browser signed in at the issuer as `user`. */
  browserOf(user: string): HttpBrowser;
}

export interface ConsentReplicaOptions {
  /** `replicas.leaseMs` of both (default 1000: a dead replica's tasks are taken over soon). */
  leaseMs?: number;
  /** `log.level` of both (default 'info'). */
  logLevel?: string;
}

/** Starts everything in `scope` (stopped with it, the replicas first, then the prefix's keys deleted). */
export async function consentReplicas(scope: TestScope, options: ConsentReplicaOptions = {}): Promise<ConsentReplicas> {
  const port = await freePort();
  const origin = `http://127.0.0.1:${port}`;
  const resource = `${origin}/mcp`;
  const issuer = await startAuthServer({ loginClients: { [LOGIN_CLIENT]: { secret: 'login-secret', redirectUris: [`${origin}/oauth/login/callback`] } } });
  scope.defer(() => issuer.close());
  const thirdParty = await startThirdPartyAs({ autoApprove: true });
  scope.defer(() => thirdParty.close());
  const upstream = await startThirdPartyUpstream({ authorizationServer: thirdParty });
  scope.defer(() => upstream.close());
  const store = sharedRedisStore(scope, 'consent-replicas');
  const config: Json = {
    listen: { host: '127.0.0.1', path: '/mcp', publicUrl: origin },
    store,
    log: { level: options.logLevel ?? 'info' },
    auth: { resource, oauth: { issuer: issuer.issuer, login: { clientId: LOGIN_CLIENT, clientSecret: 'login-secret' } } },
    identity: { sealingKeys: [{ kid: 's1', key: SEALING_KEY }] },
    upstreams: { tp: { url: upstream.url, prefix: 'tp_', auth: { authorizationCode: {} } } },
    tasks: { defaults: { mode: 'optional', pollIntervalMs: 100 } },
    replicas: { leaseMs: options.leaseMs ?? 1000, drainTimeoutMs: 0 },
  };
  const a = await replicaProcess(scope, config);
  const b = await replicaProcess(scope, config);
  const replicas = { a, b };
  let target: ReplicaName = 'a';
  const counts: Record<ReplicaName, number> = { a: 0, b: 0 };
  await balancer(scope, port, () => {
    counts[target]++;
    return replicas[target].port;
  });
  return {
    issuer,
    thirdParty,
    upstream,
    a,
    b,
    origin,
    resource,
    prefix: store.prefix,
    route: (to) => (target = to),
    forwarded: () => ({ ...counts }),
    tokenFor: (user) => issuer.mint({ sub: user, aud: resource }),
    browserOf: (user) => {
      const browser = new HttpBrowser();
      browser.setCookie(issuer.issuer, LOGIN_COOKIE, user);
      return browser;
    },
  };
}

/** A replica process, killed with the scope (also when a test has already killed it with SIGKILL). */
async function replicaProcess(scope: TestScope, config: Json): Promise<GatewayChild> {
  const child = await spawnGateway({ config });
  scope.defer(() => child.kill().catch(() => undefined));
  return child;
}

/** A reverse proxy on `port` that forwards each request, Host kept, to the replica port `target()` names when it arrives. */
async function balancer(scope: TestScope, port: number, target: () => number): Promise<void> {
  const server = http.createServer((req, res) => {
    const forwarded = http.request({ host: '127.0.0.1', port: target(), path: req.url, method: req.method, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    forwarded.on('error', () => res.destroy());
    req.pipe(forwarded);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve());
  });
  scope.defer(() => new Promise<void>((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  }));
}

/**
 * Every key under `prefix` on the shared test Redis with its value as text, whatever its type (string, hash, set,
 * list, sorted set, stream): what someone reading the store would see.
 */
export async function redisContents(prefix: string): Promise<Map<string, string>> {
  const redis = new Redis(TEST_REDIS_URL);
  const contents = new Map<string, string>();
  try {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
      cursor = next;
      for (const key of keys) contents.set(key, await valueText(redis, key));
    } while (cursor !== '0');
  } finally {
    await redis.quit();
  }
  return contents;
}

async function valueText(redis: Redis, key: string): Promise<string> {
  const type = await redis.type(key);
  switch (type) {
    case 'string':
      return (await redis.getBuffer(key))?.toString('latin1') ?? '';
    case 'hash':
      return JSON.stringify(await redis.hgetall(key));
    case 'set':
      return JSON.stringify(await redis.smembers(key));
    case 'list':
      return JSON.stringify(await redis.lrange(key, 0, -1));
    case 'zset':
      return JSON.stringify(await redis.zrange(key, '0', '-1', 'WITHSCORES'));
    case 'stream':
      return JSON.stringify(await redis.xrange(key, '-', '+'));
    case 'none':
      return ''; // expired or deleted between SCAN and the read
    default:
      throw new Error(`key ${key} has a type this reader does not know: ${type}`);
  }
}
