// The upstream-identity parts of the config schema (issue 33): the gateway's own signing and sealing keys
// (top-level `identity`) and how the gateway authenticates to one HTTP upstream (`upstreams.<name>.auth`). Key
// material is checked here, at load: a PEM that does not parse or a sealing key of the wrong size is a located
// config error, never a failure at the first call that needs it.
import { createPrivateKey, type KeyObject } from 'node:crypto';
import { z } from 'zod';
import { httpUrl, int } from './fields.js';

export const IDENTITY_DEFAULTS = Object.freeze({
  signedIdentityTtlSeconds: 300,
  /** Longer-lived signed identities are bearer tokens an upstream log could leak for too long. */
  maxSignedIdentityTtlSeconds: 3_600,
  tokenTimeoutMs: 10_000,
  tokenEndpointAuthMethod: 'client_secret_basic',
} as const);

const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
// Headers a claim may not set: the credential itself, and what the transport or MCP owns.
const RESERVED_HEADERS = new Set(['authorization', 'host', 'content-length', 'content-type', 'transfer-encoding', 'connection', 'accept', 'mcp-session-id', 'mcp-protocol-version', 'last-event-id']);
const claimHeaderName = z
  .string()
  .regex(HEADER_NAME, { error: 'not a valid HTTP header name' })
  .refine((name) => !RESERVED_HEADERS.has(name.toLowerCase()), { error: 'this header belongs to the credential or the transport; a claim may not set it' });
const KID = /^[A-Za-z0-9_-]{1,64}$/;
const kid = z.string().regex(KID, { error: 'a key id is 1-64 letters, digits, "_" or "-"' });

/** What a PEM private key is, or why it is not usable: the algorithm follows from the key. */
export function signingAlgorithmOf(pem: string): { alg: 'ES256' | 'RS256'; key: KeyObject } | { problem: string } {
  let key: KeyObject;
  try {
    key = createPrivateKey({ key: pem, format: 'pem' });
  } catch {
    return { problem: 'not a PEM private key (expected PKCS#8: "-----BEGIN PRIVATE KEY-----")' };
  }
  if (key.asymmetricKeyType === 'ec') {
    const curve = key.asymmetricKeyDetails?.namedCurve;
    return curve === 'prime256v1' ? { alg: 'ES256', key } : { problem: `an EC key on ${curve ?? 'an unknown curve'}; only P-256 (ES256) is supported` };
  }
  if (key.asymmetricKeyType === 'rsa') {
    const bits = key.asymmetricKeyDetails?.modulusLength ?? 0;
    return bits >= 2048 ? { alg: 'RS256', key } : { problem: `an RSA key of ${bits} bits; at least 2048 are required` };
  }
  return { problem: `a ${key.asymmetricKeyType ?? 'unknown'} key; only EC P-256 (ES256) and RSA (RS256) are supported` };
}

const privateKeyPem = z.string().superRefine((pem, ctx) => {
  const result = signingAlgorithmOf(pem);
  if ('problem' in result) ctx.addIssue({ code: 'custom', input: '[redacted]', message: result.problem });
});

/** Base64 (standard or url-safe) of exactly 32 bytes: an AES-256 key. */
export function sealingKeyBytes(text: string): Buffer | undefined {
  const trimmed = text.trim();
  if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(trimmed)) return undefined;
  const bytes = Buffer.from(trimmed.replace(/-/g, '+').replace(/_/g, '/'), 'base64');
  return bytes.length === 32 ? bytes : undefined;
}

const sealingKey = z.string().refine((v) => sealingKeyBytes(v) !== undefined, {
  error: 'expected the base64 of exactly 32 random bytes (e.g. `openssl rand -base64 32`)',
});

const uniqueKids = (keys: readonly { kid: string }[], ctx: z.RefinementCtx): void => {
  const seen = new Set<string>();
  keys.forEach(({ kid: id }, i) => {
    if (seen.has(id)) ctx.addIssue({ code: 'custom', path: [i, 'kid'], input: id, message: `key id "${id}" is used twice` });
    seen.add(id);
  });
};

export const SigningKeySchema = z.strictObject({
  kid: kid.describe('Key id (`kid` header and JWK), 1-64 letters, digits, `_` or `-`; unique.'),
  privateKey: privateKeyPem.describe(`PEM PKCS#8 private key (use \`\${ENV}\`): EC P-256 signs ES256, RSA (2048 bits
    or more) RS256. Checked at load; redacted by \`check-config\`.`),
});
export const SealingKeySchema = z.strictObject({
  kid: kid.describe('Key id recorded with each sealed value, 1-64 letters, digits, `_` or `-`; unique.'),
  key: sealingKey.describe(`Base64 of exactly 32 random bytes (\`openssl rand -base64 32\`; use \`\${ENV}\`).
    Redacted by \`check-config\`.`),
});
// RFC 8414 §2: an issuer has no query or fragment.
const issuerUrl = httpUrl.refine((v) => !v.includes('#') && !v.includes('?'), { error: 'an issuer URL has no query or fragment (RFC 8414)' });
export const IdentitySchema = z.strictObject({
  issuer: httpUrl.optional().meta({
    description: `The \`iss\` of what the gateway signs, an http(s) URL; its keys are at
      \`<listen URL>/.well-known/jwks.json\`.`,
    derivedDefault: 'the origin of `auth.resource`, else `http://<listen.host>:<listen.port>`',
  }),
  keys: z.array(SigningKeySchema).superRefine(uniqueKids).default(() => []).describe(`Signing keys: the first signs,
    all are published at \`/.well-known/jwks.json\` (add the new key second, publish, then move it first to
    rotate).`),
  sealingKeys: z.array(SealingKeySchema).superRefine(uniqueKids).default(() => []).describe(`AES-256-GCM keys sealing
    what a task keeps to act for its caller later (on any replica, after a restart): the first seals, all open; a
    value sealed with a key no longer listed cannot be opened.`),
  allowedAuthorizationServers: z.array(issuerUrl).min(1).optional().describe(`Issuers an \`authorizationCode\`
    upstream's discovered authorization server may have. Absent: any https one (loopback excepted). A server not
    listed is sent nothing and the user is not sent to it: the connection fails naming it.`),
});

const authMethod = z.enum(['client_secret_basic', 'client_secret_post']).default(IDENTITY_DEFAULTS.tokenEndpointAuthMethod);
const upstreamUrl = "the upstream's `url`";
// One client, two grants: clientCredentials and tokenExchange name their authorization server alike.
const clientShape = {
  clientId: z.string().min(1).describe("The gateway's client id at the upstream's authorization server."),
  clientSecret: z.string().min(1).describe('Its client secret (use `${ENV}`); redacted by `check-config`, never logged.'),
  tokenUrl: httpUrl.optional().describe(`The token endpoint, used as it is. Absent: read from \`issuer\`'s metadata, or
    discovered as an MCP client does, from the upstream's 401 \`WWW-Authenticate: Bearer resource_metadata=…\` (or its
    \`/.well-known/oauth-protected-resource\`), RFC 9728 metadata, then the authorization server's RFC 8414 metadata
    (OpenID Connect discovery as a fallback); a discovered server is used only when \`trustedIssuers\` or
    \`auth.oauth.issuer\` names it.`),
  issuer: issuerUrl.optional().describe(`The authorization server's issuer: its token endpoint is read from its own RFC
    8414 (or OpenID Connect) metadata, and the upstream is not asked where to go. Not with \`tokenUrl\`.`),
  trustedIssuers: z.array(issuerUrl).min(1).optional().describe(`Issuers an authorization server found by discovery may
    have; the first the upstream names that is listed is used. \`auth.oauth.issuer\` is trusted as well (it already
    vouches for every caller). A server the upstream names that is neither gets nothing (not the client secret, nor
    with \`tokenExchange\` the caller's access token), not even a request: the call fails with \`cause:
    untrusted_server\`, naming it. Not with \`tokenUrl\` or \`issuer\`. Without any of the three and without
    \`auth.oauth\`, refused at load.`),
  resource: httpUrl.optional().meta({ description: "RFC 8707 `resource` asked for: the upstream's URL unless given.", derivedDefault: upstreamUrl }),
  scope: z.string().min(1).optional().describe("Space-separated scopes asked for. Absent: none (the server's default)."),
  tokenEndpointAuthMethod: authMethod.describe(`How the client authenticates to the token endpoint: HTTP Basic
    (\`client_secret_basic\`) or form fields (\`client_secret_post\`).`),
};
/** How a client config names its authorization server (at most one way; see oneServerNaming). */
export interface ServerNaming {
  tokenUrl?: string | undefined;
  issuer?: string | undefined;
  trustedIssuers?: readonly string[] | undefined;
}

/**
 * Where the client's secret (and, for token exchange, the caller's token) may go: one way of naming the
 * authorization server at a time. Whether a client with none of them may discover one depends on `auth.oauth`
 * (cross-section.ts), which this schema does not see.
 */
const oneServerNaming = (client: ServerNaming, ctx: z.RefinementCtx): void => {
  if (client.tokenUrl !== undefined && client.issuer !== undefined) {
    ctx.addIssue({ code: 'custom', path: ['issuer'], input: client.issuer, message: 'give tokenUrl or issuer, not both: tokenUrl is used as it is, issuer is asked for its token endpoint' });
  }
  if (client.trustedIssuers !== undefined && (client.tokenUrl !== undefined || client.issuer !== undefined)) {
    ctx.addIssue({ code: 'custom', path: ['trustedIssuers'], input: client.trustedIssuers, message: `trustedIssuers is for a server found by discovery; with ${client.tokenUrl !== undefined ? 'tokenUrl' : 'issuer'} nothing is discovered` });
  }
};
export const ClientCredentialsSchema = z.strictObject(clientShape).superRefine(oneServerNaming);
export const TokenExchangeSchema = z
  .strictObject({
    ...clientShape,
    audience: z.string().min(1).optional().describe('RFC 8693 `audience` asked for, when the server wants one.'),
  })
  .superRefine(oneServerNaming);
export const SignedIdentitySchema = z.strictObject({
  ttlSeconds: int(1, IDENTITY_DEFAULTS.maxSignedIdentityTtlSeconds)
    .default(IDENTITY_DEFAULTS.signedIdentityTtlSeconds)
    .describe('Lifetime of each token (`exp` - `iat`), 1 to 3600.'),
  claims: z.array(z.string().min(1)).default(() => []).describe(`Claims copied from the caller's verified token when it
    has them, e.g. \`[email, groups]\`.`),
  audience: z.string().min(1).optional().meta({ description: 'The `aud` of the token.', derivedDefault: upstreamUrl }),
});
// Parameters of the authorization request the gateway sets itself: an extra one of the same name would change the
// flow's security (redirect, PKCE, state) or what the user is asked (client, scopes, resource).
const RESERVED_AUTHORIZE_PARAMS = ['response_type', 'client_id', 'redirect_uri', 'state', 'code_challenge', 'code_challenge_method', 'scope', 'resource', 'nonce', 'request', 'request_uri'];
export const AuthorizationCodeSchema = z
  .strictObject({
    clientId: z.string().min(1).optional().describe(`The gateway's client id at the authorization server. Absent: the
      gateway registers itself there (RFC 7591 dynamic client registration at its \`registration_endpoint\`, once per
      issuer, shared by every replica through the store), or, where the server advertises
      \`client_id_metadata_document_supported\` and \`listen.publicUrl\` is https, uses a Client ID Metadata Document
      it serves at \`<publicUrl>/oauth/client-metadata.json\`.`),
    clientSecret: z.string().min(1).optional().describe(`Its client secret (use \`\${ENV}\`), for a confidential client;
      redacted by \`check-config\`, never logged. Needs \`clientId\`.`),
    scopes: z.array(z.string().min(1)).default(() => []).describe(`Scopes asked for. Absent: the upstream's
      \`scopes_supported\` (RFC 9728 metadata) when it names some, else none (the server's default).`),
    resource: httpUrl.optional().meta({ description: "RFC 8707 `resource` asked for.", derivedDefault: upstreamUrl }),
    authorizationServer: issuerUrl.optional().describe(`The authorization server's issuer: its endpoints are read from
      its RFC 8414 metadata. Absent: discovered from the upstream's 401 (RFC 9728, then RFC 8414), https only
      (loopback excepted) and, when \`identity.allowedAuthorizationServers\` is set, only one it lists. The user is
      shown it on the consent page either way.`),
    extraAuthorizeParams: z
      .record(z.string().min(1), z.string())
      .default(() => ({}))
      .describe(`Parameters added to the authorization request, e.g. \`{ prompt: consent, access_type: offline }\`;
        those the flow sets itself (\`${RESERVED_AUTHORIZE_PARAMS.join('`, `')}\`) are refused.`),
  })
  .superRefine((code, ctx) => {
    if (code.clientSecret !== undefined && code.clientId === undefined) {
      ctx.addIssue({ code: 'custom', path: ['clientSecret'], input: undefined, message: 'a client secret needs its clientId: without one the gateway registers itself and gets its own' });
    }
    for (const name of Object.keys(code.extraAuthorizeParams)) {
      if (RESERVED_AUTHORIZE_PARAMS.includes(name.toLowerCase())) {
        ctx.addIssue({ code: 'custom', path: ['extraAuthorizeParams', name], input: undefined, message: `the gateway sets ${name} itself: it may not be replaced` });
      }
    }
  });
export const UpstreamAuthSchema = z
  .strictObject({
    clientCredentials: ClientCredentialsSchema.optional().describe(`The gateway is the upstream's OAuth client (RFC 6749
      client credentials): one token for every caller, cached until shortly before it expires.`),
    tokenExchange: TokenExchangeSchema.optional().describe(`RFC 8693 token exchange: the caller's verified access token
      is the \`subject_token\`, exchanged for a token for the upstream, cached per caller's token (under a hash of
      it): each request is served with its own token's rights. A caller without one (an API-key principal) gets an
      error naming the upstream; needs \`auth.oauth\`. The gateway's own requests use client credentials of the same
      client.`),
    signedIdentity: SignedIdentitySchema.optional().describe(`The gateway signs a short-lived JWT for the upstream
      (\`iss\` = \`identity.issuer\`, \`sub\` = the qualified principal, \`jti\`), with the first of
      \`identity.keys\` (required); the upstream verifies it with the gateway's \`/.well-known/jwks.json\`.`),
    authorizationCode: AuthorizationCodeSchema.optional().describe(`Each user connects their own account at the
      upstream's authorization server (OAuth authorization code with PKCE): the gateway sends a caller without a
      connection a link (a URL elicitation, or the link in an error result), keeps the tokens sealed per user, and
      calls as that user from then on, refreshing ahead of expiry. Streamable HTTP and SSE upstreams; needs
      \`auth.oauth.login\` and \`identity.sealingKeys\` (docs/security.md, "Per-user consent").`),
    claimHeaders: z.record(claimHeaderName, z.string().min(1)).optional().describe(`Headers from the caller's verified
      claims, \`{ <header>: <claim> }\` (or \`principal\`), for upstreams on a trusted network: arrays joined by
      \`,\`, control characters removed, non-ASCII percent-encoded (UTF-8), at most 1024 bytes; an absent claim sends
      no header.`),
    timeoutMs: int(1).default(IDENTITY_DEFAULTS.tokenTimeoutMs).describe(`Deadline of one token request (with
      discovery): past it the call fails with an error naming the upstream.`),
  })
  .superRefine((auth, ctx) => {
    const modes = (['clientCredentials', 'tokenExchange', 'signedIdentity', 'authorizationCode'] as const).filter((m) => auth[m] !== undefined);
    if (modes.length > 1) {
      ctx.addIssue({ code: 'custom', path: [modes[1] ?? ''], input: undefined, message: `give one of clientCredentials, tokenExchange, signedIdentity, authorizationCode; this upstream has ${modes.join(' and ')}` });
    }
    if (modes.length === 0 && auth.claimHeaders === undefined) {
      ctx.addIssue({ code: 'custom', path: [], input: auth, message: 'auth needs clientCredentials, tokenExchange, signedIdentity, authorizationCode or claimHeaders' });
    }
  });

// ---- Refusing token passthrough -----------------------------------------------------------------------------------
// The MCP authorization spec: a server "MUST NOT pass through the token it received from the MCP client" (design
// invariant 7). Operators coming from other gateways write it in several ways; each is refused by name, at its line.

const PASSTHROUGH_WHY =
  'the gateway never forwards the client\'s own token to an upstream (the MCP authorization spec: a server "MUST NOT pass ' +
  'through the token it received from the MCP client"); use tokenExchange to get a token for the upstream on the caller\'s ' +
  'behalf, or signedIdentity';
const PASSTHROUGH_VALUES = /^(passthrough|pass-through|forward|forwardtoken|forward-token)$/i;
const PASSTHROUGH_KEYS = ['passthrough', 'passThrough', 'forward', 'forwardToken', 'forwardClientToken'];

export interface RefusedSetting {
  path: (string | number)[];
  message: string;
  /** The `auth` it is in: the schema's own complaints about it would only distract from this one. */
  section: (string | number)[];
}

/**
 * Settings of the raw (interpolated) config that ask to forward the client's token: `auth: passthrough|forward`,
 * `auth.passthrough|forwardToken|forwardClientToken`. (Config strings have no client-token placeholder:
 * interpolation reads the process environment at load only, so a `headers.Authorization` cannot name one.)
 */
export function passthroughSettings(raw: unknown): RefusedSetting[] {
  const upstreams = isMap(raw) ? raw.upstreams : undefined;
  if (!isMap(upstreams)) return [];
  const refused: RefusedSetting[] = [];
  for (const [name, upstream] of Object.entries(upstreams)) {
    const auth = isMap(upstream) ? upstream.auth : undefined;
    if (typeof auth === 'string' && PASSTHROUGH_VALUES.test(auth.trim())) {
      const section = ['upstreams', name, 'auth'];
      refused.push({ path: section, section, message: `"${auth}" is refused: ${PASSTHROUGH_WHY}` });
    } else if (isMap(auth)) {
      for (const key of PASSTHROUGH_KEYS) {
        if (key in auth) refused.push({ path: ['upstreams', name, 'auth', key], section: ['upstreams', name, 'auth'], message: `refused: ${PASSTHROUGH_WHY}` });
      }
    }
  }
  return refused;
}

function isMap(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}
