// The `auth` section of the config schema: who may call (API keys, OAuth), what each caller may use (access
// rules), how often (rate limits) and who administers the gateway.
import { z } from 'zod';
import { DEFAULTS } from './defaults.js';
import { httpUrl, int } from './fields.js';
import { restate } from './key-docs.js';

const glob = z.string().min(1);
export const ApiKeySchema = z
  .strictObject({
    principal: z
      .string()
      .min(1)
      .refine((p) => !/^(key|oauth):/.test(p), { error: 'a principal name may not start with "key:" or "oauth:" (rules read those as qualifiers)' })
      .describe("The key's name; may not start with `key:` or `oauth:`."),
    key: z
      .string()
      .min(16, { error: 'an API key needs at least 16 characters' })
      .optional()
      .describe('The key itself, at least 16 characters (use `${ENV}`). Give `key` or `sha256`, not both.'),
    sha256: z
      .string()
      .regex(/^[0-9a-fA-F]{64}$/, { error: 'expected the SHA-256 of the key as 64 hex digits' })
      .optional()
      .describe("The key's SHA-256 as 64 hex digits instead of the key (`printf %s \"$KEY\" | sha256sum`)."),
    scopes: z.array(z.string().min(1)).default([]).describe('Scopes the key carries, for `access` and `admin` rules.'),
  })
  .refine((k) => (k.key === undefined) !== (k.sha256 === undefined), { error: 'give either key or sha256 (the key\'s SHA-256, hex), not both' });
export const OAuthSchema = z.strictObject({
  // RFC 8414 §2: an issuer has no query or fragment (principals end the issuer at its first "#").
  issuer: httpUrl
    .refine((v) => !v.includes('#') && !v.includes('?'), { error: 'an issuer URL has no query or fragment (RFC 8414)' })
    .describe(`Exactly the \`iss\` of its tokens: an http(s) URL without query or fragment. \`jwks_uri\` is found by
      RFC 8414 metadata, then OpenID Connect discovery.`),
  jwksUri: httpUrl.optional().describe("The issuer's JWKS URL (http or https), to skip discovery."),
  audience: z
    .string()
    .min(1)
    .optional()
    .meta({ description: 'The audience (`aud`) tokens must name.', derivedDefault: '`auth.resource`' }),
  requiredScopes: z.array(z.string().min(1)).default([]).describe('Every token must carry these, else 403 `insufficient_scope`.'),
  clockToleranceSeconds: int(0, 300).default(DEFAULTS.clockToleranceSeconds).describe(`Skew allowed for \`exp\`,
    \`nbf\` and \`iat\`: a token expired, not yet valid or issued further in the future than this gets 401
    \`invalid_token\`.`),
  login: z
    .strictObject({
      clientId: z.string().min(1).describe("The gateway's client id at the issuer, registered with the redirect URI `<public origin>/oauth/login/callback`."),
      clientSecret: z.string().min(1).optional().describe('Its secret (use `${ENV}`), for a confidential client; redacted by `check-config`, never logged.'),
    })
    .optional()
    .describe(`The gateway signs a browser in at this issuer (authorization code with PKCE) to learn who opened a
      connect link or the dashboard's Connections view: the signed-in subject must be the principal the link was
      made for. Needed by \`upstreams.<name>.auth.authorizationCode\`.`),
});
const principalGlobs = 'Principal globs, bare or qualified as in `auth.access`.';
export const AccessRuleSchema = z
  .strictObject({
    principals: z.array(glob).default([]).describe(`The rule applies to these principal globs: bare (\`alice\`,
      \`team-*\`) matches the API key and the OAuth subject of that name; \`key:alice\` only the key, \`oauth:alice\`
      only the subject. A rule names principals or scopes (or both).`),
    scopes: z.array(z.string().min(1)).default([]).describe('The rule applies to a credential carrying any of these scopes.'),
    tools: z.array(glob).default([]).describe('Globs on exposed tool names (prefixes included) the rule grants.'),
    prompts: z.array(glob).default([]).describe('Globs on exposed prompt names the rule grants.'),
    resources: z.array(glob).default([]).describe(`Globs on resource URIs (templates by their \`uriTemplate\` text) the
      rule grants, compared in RFC 3986 normal form.`),
  })
  .refine((r) => r.principals.length > 0 || r.scopes.length > 0, { error: 'a rule names principals or scopes (or both)' });
// A rule's rates replace the section's; the keys it leaves out keep them.
export const RateLimitRuleSchema = z.strictObject({
  principals: z.array(glob).min(1).describe(principalGlobs),
  ...restate({ requestsPerSecond: int(0).optional(), taskCreationsPerMinute: int(0).optional() }, (key) => ({
    description: `Replaces \`auth.rateLimits.${key}\` for the principals the rule matches.`,
    derivedDefault: `\`auth.rateLimits.${key}\``,
  })),
});
export const RateLimitsSchema = z.strictObject({
  requestsPerSecond: int(0).default(0).describe(`Requests to the MCP endpoint, each message of a batch one; a batch that
    goes past it is refused whole.`),
  taskCreationsPerMinute: int(0).default(0).describe('New tasks (both revisions).'),
  rules: z
    .array(RateLimitRuleSchema)
    .default([])
    .describe('The first rule whose `principals` match replaces the limits it names.'),
});
export const AdminSchema = z
  .strictObject({
    principals: z
      .array(glob)
      .default([])
      .describe('Principal globs, matched as `auth.access` principals are, e.g. `[ops, "key:deploy-*"]`.'),
    scopes: z.array(z.string().min(1)).default([]).describe('Or any credential carrying one of these scopes.'),
  })
  .refine((r) => r.principals.length > 0 || r.scopes.length > 0, { error: 'admin names principals or scopes (or both)' });
export const AuthSchema = z
  .strictObject({
    resource: httpUrl.describe(`An http(s) URL: the canonical URI of this endpoint as clients reach it (behind a
      TLS-terminating proxy, the public https one): tokens must be issued for it (\`aud\`), and the 401's
      \`resource_metadata\` URL is built from it.`),
    apiKeys: z
      .array(ApiKeySchema)
      .default([])
      .describe('Static bearer tokens, kept only as their SHA-256. The principal is `key:<principal>`.'),
    oauth: OAuthSchema.optional().describe(`JWT access tokens (RFC 9068) from an OAuth 2.1 / OIDC authorization server;
      the gateway is a resource server. The principal is \`oauth:<issuer>#<sub>\`; scopes come from \`scope\` or
      \`scp\`.`),
    access: z.array(AccessRuleSchema).optional().describe(`Access rules. When present, default deny: only what a rule
      that applies grants is usable; the rest is left out of lists and answered as unknown, and the denial is
      audited. A kind no rule names is hidden from everyone. Absent: every caller may use everything.`),
    rateLimits: RateLimitsSchema.prefault({}).describe(`Per principal, counted in the store across replicas, in fixed
      windows; 0 = unlimited. Past a limit: HTTP 429 with \`Retry-After\` and a JSON-RPC error (-32001) whose
      \`data.retryAfterMs\` says when to retry.`),
    admin: AdminSchema.optional().describe(`Who may use the dashboard and \`/metrics\` while auth is on (401 without a
      credential, 403 for anyone else). Absent: nobody. Names principals or scopes (or both).`),
  })
  .refine((a) => a.apiKeys.length > 0 || a.oauth !== undefined, { error: 'auth needs apiKeys, oauth, or both' });
