// What a bearer token must be before its signature is worth checking: an OAuth access token in the shape RFC 9068
// gives it. A compact JWS (three base64url parts; an encrypted JWT has five and is refused), a JOSE header with an
// accepted `alg`, an access-token `typ` and no `crit` extension, and claims naming the configured issuer and
// audience, an expiry, and times that hold within the clock tolerance. Everything here reads only the token, so a
// malformed or misdirected token is refused at once, without contacting the issuer (its metadata and keys may be
// slow or down); jose then checks the signature and the same claims again.
//
// A refusal says what kind of fault it was in one fixed ASCII sentence per kind, which is all a client is told
// (it goes into WWW-Authenticate). The details, which may quote the token, are for the debug log only.
import { errors } from 'jose';

export type TokenFault = 'malformed' | 'algorithm' | 'type' | 'issuer' | 'audience' | 'no_expiry' | 'expired' | 'not_yet_valid' | 'no_subject' | 'signature';

/** The client's whole explanation per fault: fixed text, never anything taken from the token or from jose. */
export const TOKEN_FAULTS: Readonly<Record<TokenFault, string>> = {
  malformed: 'The token is not a well-formed JWT access token',
  algorithm: 'The token is not signed with an accepted algorithm',
  type: 'The token is not an access token (typ)',
  issuer: 'The token was not issued by the trusted authorization server',
  audience: 'The token was not issued for this resource (aud)',
  no_expiry: 'The token has no expiry (exp)',
  expired: 'The token has expired',
  not_yet_valid: 'The token is not valid yet (nbf or iat)',
  no_subject: 'The token names no subject (sub)',
  signature: 'The token signature does not verify',
};

export class TokenRefused extends Error {
  constructor(
    readonly fault: TokenFault,
    /** Why exactly, for the debug log: may quote the token. */
    readonly detail: string,
  ) {
    super(TOKEN_FAULTS[fault]);
  }
}

export interface TokenExpectations {
  issuer: string;
  audience: string;
  algorithms: readonly string[];
  /** Seconds of clock skew allowed either way for `exp`, `nbf` and `iat`. */
  clockToleranceS: number;
}

type Json = Record<string, unknown>;

const COMPACT_JWS = /^([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]+)$/;

/**
 * `typ` values an access token may carry (RFC 7515 §4.1.9: media types, case-insensitive, `application/` optional).
 * RFC 9068 asks for `at+jwt`; `JWT` is what many providers still put on their access tokens (Keycloak, Entra ID,
 * Auth0 without an access-token profile), so it passes too. Any other type says the token is something else (an ID
 * token typed for its use, a logout or DPoP proof, a nested JWE) and must not pass as an access token (RFC 8725
 * §3.11). No `typ` at all passes: RFC 7519 makes it optional and some providers (AWS Cognito) omit it; what tells
 * an untyped ID token from an access token is then its audience (a client id, not this resource), checked below.
 */
const ACCESS_TOKEN_TYPES = new Set(['application/at+jwt', 'application/jwt']);

/** The token's header and claims when it may be an access token for this resource; throws TokenRefused otherwise. */
export function inspectAccessToken(token: string, expected: TokenExpectations, nowS = Date.now() / 1000): { header: Json; claims: Json } {
  const parts = COMPACT_JWS.exec(token);
  if (parts === null) throw new TokenRefused('malformed', 'not three base64url parts (compact JWS)');
  const header = jsonPart(parts[1] as string, 'header');
  const claims = jsonPart(parts[2] as string, 'claims');

  if (typeof header.alg !== 'string' || !expected.algorithms.includes(header.alg)) throw new TokenRefused('algorithm', `alg ${JSON.stringify(header.alg)}`);
  if ('crit' in header) throw new TokenRefused('malformed', `crit names extensions this resource does not know: ${JSON.stringify(header.crit)}`);
  if (header.typ !== undefined && (typeof header.typ !== 'string' || !ACCESS_TOKEN_TYPES.has(mediaType(header.typ)))) {
    throw new TokenRefused('type', `typ ${JSON.stringify(header.typ)}`);
  }

  if (claims.iss !== expected.issuer) throw new TokenRefused('issuer', `iss ${JSON.stringify(claims.iss)}`);
  const audiences = typeof claims.aud === 'string' ? [claims.aud] : Array.isArray(claims.aud) ? claims.aud : [];
  if (!audiences.includes(expected.audience)) throw new TokenRefused('audience', `aud ${JSON.stringify(claims.aud)}`);
  if (typeof claims.sub !== 'string' || claims.sub === '') throw new TokenRefused('no_subject', `sub ${JSON.stringify(claims.sub)}`);

  const tolerance = expected.clockToleranceS;
  if (claims.exp === undefined) throw new TokenRefused('no_expiry', 'no exp claim (RFC 9068 §2.2)');
  const exp = numericDate(claims, 'exp');
  if (exp <= nowS - tolerance) throw new TokenRefused('expired', `exp ${exp}, now ${Math.floor(nowS)}`);
  for (const claim of ['nbf', 'iat'] as const) {
    if (claims[claim] === undefined) continue;
    const time = numericDate(claims, claim);
    if (time > nowS + tolerance) throw new TokenRefused('not_yet_valid', `${claim} ${time} is in the future (now ${Math.floor(nowS)})`);
  }
  return { header, claims };
}

/**
 * jose's refusal of a token that passed inspectAccessToken, as a fault of the token; undefined when the failure is
 * the issuer's side (its keys could not be fetched or used), which is no reason to refuse the token.
 */
export function faultOf(error: unknown): TokenRefused | undefined {
  if (!(error instanceof errors.JOSEError)) return undefined;
  const detail = `${error.code}: ${error.message}`;
  if (error instanceof errors.JWTExpired) return new TokenRefused('expired', detail);
  if (error instanceof errors.JWTClaimValidationFailed) {
    const byClaim: Record<string, TokenFault> = { iss: 'issuer', aud: 'audience', exp: 'no_expiry', nbf: 'not_yet_valid', iat: 'not_yet_valid', sub: 'no_subject', typ: 'type' };
    return new TokenRefused(byClaim[error.claim] ?? 'malformed', detail);
  }
  if (error instanceof errors.JOSEAlgNotAllowed) return new TokenRefused('algorithm', detail);
  if (
    error instanceof errors.JWSSignatureVerificationFailed ||
    error instanceof errors.JWKSNoMatchingKey ||
    error instanceof errors.JWKSMultipleMatchingKeys ||
    error instanceof errors.JOSENotSupported
  ) {
    return new TokenRefused('signature', detail);
  }
  if (error instanceof errors.JWSInvalid || error instanceof errors.JWTInvalid) return new TokenRefused('malformed', detail);
  // JWKSTimeout, JWKSInvalid, and the generic errors of an unexpected JWKS answer: the issuer's side.
  return undefined;
}

function jsonPart(part: string, what: string): Json {
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(part, 'base64url').toString('utf8'));
  } catch {
    throw new TokenRefused('malformed', `the ${what} is not base64url JSON`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new TokenRefused('malformed', `the ${what} is not a JSON object`);
  return value as Json;
}

function numericDate(claims: Json, claim: 'exp' | 'nbf' | 'iat'): number {
  const value = claims[claim];
  if (typeof value !== 'number' || !Number.isFinite(value)) throw new TokenRefused('malformed', `${claim} is not a NumericDate: ${JSON.stringify(value)}`);
  return value;
}

/** A `typ` value as a full media type, lower-case (RFC 7515 §4.1.9). */
function mediaType(typ: string): string {
  const lower = typ.toLowerCase();
  return lower.includes('/') ? lower : `application/${lower}`;
}
