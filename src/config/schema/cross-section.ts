// The config schema's rules across sections: a value one section allows alone but that contradicts another's
// (listen timeouts and budgets against each other, endpoint paths against listen.path, the replicas' drain against
// the shutdown timeout, an upstream's signed identity against the gateway's signing keys). The root schema runs them once every section has parsed.
import type { z } from 'zod';
import type { IdentitySchema, ServerNaming } from './identity.js';
import type { ListenSchema } from './listen.js';
import type { DashboardSchema, MetricsSchema, ReplicasSchema } from './runtime.js';

/** The parsed sections these rules read. */
interface Sections {
  listen: z.output<typeof ListenSchema>;
  metrics: z.output<typeof MetricsSchema>;
  dashboard: z.output<typeof DashboardSchema>;
  replicas: z.output<typeof ReplicasSchema>;
  shutdownTimeoutMs: number;
  identity?: z.output<typeof IdentitySchema> | undefined;
  upstreams: Record<string, object>;
  auth?: { resource?: string; oauth?: { login?: unknown } | undefined } | undefined;
  tasks: { rules: readonly { match: string; approval?: unknown }[] };
}

export function checkAcrossSections(config: Sections, ctx: z.RefinementCtx): void {
  // Approvers are authenticated principals: without auth nobody could tell an approver from the caller.
  if (config.auth === undefined) {
    config.tasks.rules.forEach((rule, i) => {
      if (rule.approval !== undefined) {
        ctx.addIssue({ code: 'custom', path: ['tasks', 'rules', i, 'approval'], input: undefined, message: `holding calls for approval needs auth: approvers are authenticated principals (tools matching "${rule.match}")` });
      }
    });
  }
  const { headersTimeoutMs, requestTimeoutMs } = config.listen;
  if (headersTimeoutMs > requestTimeoutMs) {
    ctx.addIssue({
      code: 'custom',
      path: ['listen', 'headersTimeoutMs'],
      input: headersTimeoutMs,
      message: `must be <= listen.requestTimeoutMs (${requestTimeoutMs}): the headers are part of the request`,
    });
  }
  // A budget smaller than that could never admit a request of the largest size: it would be refused as
  // "retry later" forever.
  for (const key of ['maxInflightBytes', 'maxInflightBytesPerPrincipal'] as const) {
    const budget = config.listen[key];
    if (budget > 0 && budget < 2 * config.listen.maxBodyBytes) {
      ctx.addIssue({
        code: 'custom',
        path: ['listen', key],
        input: budget,
        message: `must be 0 (unlimited) or at least 2 × listen.maxBodyBytes (${2 * config.listen.maxBodyBytes}): a body of the largest size must fit, with room left for small requests`,
      });
    }
  }
  // Each endpoint needs a path of its own (health and readiness are fixed).
  const taken = new Map<string, string>([['/healthz', 'the liveness check'], ['/readyz', 'the readiness check'], ['/approvals', 'the approvals API'], [config.listen.path, 'listen.path']]);
  for (const key of ['metrics', 'dashboard'] as const) {
    const { enabled, path } = config[key];
    const owner = enabled ? taken.get(path) : undefined;
    if (owner !== undefined) ctx.addIssue({ code: 'custom', path: [key, 'path'], input: path, message: `must differ from ${owner} (${path})` });
    if (enabled) taken.set(path, `${key}.path`);
  }
  checkUpstreamAuth(config, ctx);
  const { drainTimeoutMs } = config.replicas;
  if (config.shutdownTimeoutMs > 0 && drainTimeoutMs >= config.shutdownTimeoutMs) {
    ctx.addIssue({
      code: 'custom',
      path: ['replicas', 'drainTimeoutMs'],
      input: drainTimeoutMs,
      message: `must be < shutdownTimeoutMs (${config.shutdownTimeoutMs}): the drain must end before the process is stopped`,
    });
  }
}

/** An upstream's `auth` against the gateway's own: what it needs from `auth.oauth` and `identity.keys`. */
function checkUpstreamAuth(config: Sections, ctx: z.RefinementCtx): void {
  for (const [name, upstream] of Object.entries(config.upstreams)) {
    const auth = 'auth' in upstream ? (upstream.auth as { signedIdentity?: unknown; tokenExchange?: unknown; clientCredentials?: ServerNaming; authorizationCode?: unknown } | undefined) : undefined;
    if (auth?.authorizationCode !== undefined) checkAuthorizationCode(config, name, ctx);
    // The client's secret goes only to a server the config names or trusts: without tokenUrl, issuer or
    // trustedIssuers, only one that is auth.oauth.issuer; with no auth.oauth, none could ever be used.
    const client = auth?.clientCredentials;
    if (client !== undefined && client.tokenUrl === undefined && client.issuer === undefined && client.trustedIssuers === undefined && config.auth?.oauth === undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['upstreams', name, 'auth', 'clientCredentials'],
        input: undefined,
        message: 'names no authorization server to send the client secret to: give tokenUrl or issuer (or trustedIssuers, the servers discovery may find); the server the upstream itself names is never trusted on its word',
      });
    }
    // Only OAuth callers bring a token to exchange; without auth.oauth every caller's call would fail.
    if (auth?.tokenExchange !== undefined && config.auth?.oauth === undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['upstreams', name, 'auth', 'tokenExchange'],
        input: undefined,
        message: 'needs callers with access tokens to exchange: configure auth.oauth (API-key callers have none), or use clientCredentials or signedIdentity',
      });
    }
    // A signed identity needs a key to sign it with; without one every call to that upstream would fail.
    if (auth?.signedIdentity !== undefined && (config.identity?.keys.length ?? 0) === 0) {
      ctx.addIssue({
        code: 'custom',
        path: ['upstreams', name, 'auth', 'signedIdentity'],
        input: undefined,
        message: 'needs a signing key: add identity.keys (a PEM private key, e.g. from ${GATEWAY_SIGNING_KEY})',
      });
    }
  }
}

/**
 * What per-user consent needs of the rest (issue 41): a transport that carries a bearer token, a front door that can
 * sign a browser in (whoever opens a link must be shown to be the user it was made for), and keys to seal the
 * tokens with.
 */
function checkAuthorizationCode(config: Sections, name: string, ctx: z.RefinementCtx): void {
  const path = ['upstreams', name, 'auth', 'authorizationCode'];
  const upstream = config.upstreams[name] as { transport?: string };
  if (upstream.transport === 'stdio') {
    ctx.addIssue({ code: 'custom', path, input: undefined, message: 'is for Streamable HTTP and SSE upstreams: a stdio child has no HTTP request to carry the user\'s token (use {{upstreamToken}} with tokenExchange)' });
  }
  if (config.auth?.oauth?.login === undefined) {
    ctx.addIssue({
      code: 'custom',
      path,
      input: undefined,
      message: 'needs auth.oauth.login: the gateway must sign a browser in at the front door to tell that whoever opens a connect link is the user it was made for',
    });
  }
  if ((config.identity?.sealingKeys.length ?? 0) === 0) {
    ctx.addIssue({ code: 'custom', path, input: undefined, message: 'needs identity.sealingKeys: each user\'s tokens are kept sealed in the store' });
  }
}
