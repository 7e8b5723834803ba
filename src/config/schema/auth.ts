// The `auth` section of the config schema: who may call (API keys, OAuth), what each caller may use (access
// rules), how often (rate limits) and who administers the gateway.
import { z } from 'zod';
import { DEFAULTS } from './defaults.js';
import { httpUrl, int } from './fields.js';

const glob = z.string().min(1);
export const ApiKeySchema = z
  .strictObject({
    principal: z
      .string()
      .min(1)
      .refine((p) => !/^(key|oauth):/.test(p), { error: 'a principal name may not start with "key:" or "oauth:" (rules read those as qualifiers)' }),
    key: z.string().min(16, { error: 'an API key needs at least 16 characters' }).optional(),
    sha256: z.string().regex(/^[0-9a-fA-F]{64}$/, { error: 'expected the SHA-256 of the key as 64 hex digits' }).optional(),
    scopes: z.array(z.string().min(1)).default([]),
  })
  .refine((k) => (k.key === undefined) !== (k.sha256 === undefined), { error: 'give either key or sha256 (the key\'s SHA-256, hex), not both' });
export const OAuthSchema = z.strictObject({
  // RFC 8414 §2: an issuer has no query or fragment (principals end the issuer at its first "#").
  issuer: httpUrl.refine((v) => !v.includes('#') && !v.includes('?'), { error: 'an issuer URL has no query or fragment (RFC 8414)' }),
  jwksUri: httpUrl.optional(),
  audience: z.string().min(1).optional(),
  requiredScopes: z.array(z.string().min(1)).default([]),
  clockToleranceSeconds: int(0, 300).default(DEFAULTS.clockToleranceSeconds),
});
export const AccessRuleSchema = z
  .strictObject({
    principals: z.array(glob).default([]),
    scopes: z.array(z.string().min(1)).default([]),
    tools: z.array(glob).default([]),
    prompts: z.array(glob).default([]),
    resources: z.array(glob).default([]),
  })
  .refine((r) => r.principals.length > 0 || r.scopes.length > 0, { error: 'a rule names principals or scopes (or both)' });
const rates = { requestsPerSecond: int(0).optional(), taskCreationsPerMinute: int(0).optional() };
export const RateLimitRuleSchema = z.strictObject({ principals: z.array(glob).min(1), ...rates });
export const RateLimitsSchema = z.strictObject({
  requestsPerSecond: int(0).default(0),
  taskCreationsPerMinute: int(0).default(0),
  rules: z.array(RateLimitRuleSchema).default([]),
});
export const AdminSchema = z
  .strictObject({ principals: z.array(glob).default([]), scopes: z.array(z.string().min(1)).default([]) })
  .refine((r) => r.principals.length > 0 || r.scopes.length > 0, { error: 'admin names principals or scopes (or both)' });
export const AuthSchema = z
  .strictObject({
    resource: httpUrl,
    apiKeys: z.array(ApiKeySchema).default([]),
    oauth: OAuthSchema.optional(),
    access: z.array(AccessRuleSchema).optional(),
    rateLimits: RateLimitsSchema.prefault({}),
    admin: AdminSchema.optional(),
  })
  .refine((a) => a.apiKeys.length > 0 || a.oauth !== undefined, { error: 'auth needs apiKeys, oauth, or both' });
