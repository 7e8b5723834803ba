// The http scenario's `--credentials` variants (issue 33): the same upstream reached with static `headers`, with a
// client-credentials token from the auth-server fixture (cached by the gateway), and with an identity the gateway
// signs per caller (plus a claim header). All three sit behind the same front, one API key every bench client sends,
// so the only difference measured is the upstream credential. server-everything ignores the Authorization it gets.
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { startAuthServer, type AuthServer } from '../test/fixtures/auth-server.js';

export type CredentialMode = 'static' | 'clientCredentials' | 'signedIdentity';
export const CREDENTIAL_MODES: readonly CredentialMode[] = ['static', 'clientCredentials', 'signedIdentity'];

/** What the gateway config and the bench clients get for one credential mode. */
export interface CredentialSetup {
  /** Lines of the gateway's YAML (top level, unindented): the front's `auth` and, for signedIdentity, `identity`. */
  topLevel: string[];
  /** The upstream's own keys beside `transport` and `url` (flow-mapping entries). */
  upstream: string[];
  /** Headers every bench client sends (the front's API key). */
  clientHeaders: Record<string, string>;
  /** Called when the target is done: notes what it saw (token requests) and stops what it started. */
  stop(notes: string[]): Promise<void>;
}

const q = (s: string): string => JSON.stringify(s); // a JSON string is a valid YAML flow scalar (\n escapes too)

/** One key for the run: the front's, sent by every client (any 16+ token characters). */
const API_KEY = `bench-${randomBytes(18).toString('base64url')}`;
const CLIENT_ID = 'taskgate-bench';
const CLIENT_SECRET = randomBytes(18).toString('base64url');
/** Longer than any target runs, so the measured phase never sees a refresh (that is another cost). */
const TOKEN_LIFETIME_SECONDS = 3_600;

let signingKey: string | undefined;
/** The gateway's identity key (EC P-256, PKCS#8 PEM), made once per bench process. */
function identityKeyPem(): string {
  signingKey ??= generateKeyPairSync('ec', {
    namedCurve: 'prime256v1',
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
    publicKeyEncoding: { type: 'spki', format: 'pem' },
  }).privateKey;
  return signingKey;
}

/** The config and client headers of `mode`, for a gateway that will listen at `gatewayUrl`. */
export async function credentialSetup(mode: CredentialMode, gatewayUrl: string): Promise<CredentialSetup> {
  const front = `auth: { resource: ${q(gatewayUrl)}, apiKeys: [ { principal: bench, key: ${q(API_KEY)} } ] }`;
  const clientHeaders = { authorization: `Bearer ${API_KEY}` };
  if (mode === 'static') {
    return { topLevel: [front], upstream: [`headers: { Authorization: "Bearer static-token" }`], clientHeaders, stop: async () => {} };
  }
  if (mode === 'signedIdentity') {
    const identity = `identity: { keys: [ { kid: bench-es256, privateKey: ${q(identityKeyPem())} } ] }`;
    return {
      topLevel: [front, identity],
      upstream: ['auth: { signedIdentity: {}, claimHeaders: { x-user: principal } }'],
      clientHeaders,
      stop: async () => {},
    };
  }
  const issuer: AuthServer = await startAuthServer({
    clients: { [CLIENT_ID]: { secret: CLIENT_SECRET } },
    expiresInSeconds: TOKEN_LIFETIME_SECONDS,
  });
  const client = `{ clientId: ${CLIENT_ID}, clientSecret: ${q(CLIENT_SECRET)}, tokenUrl: ${q(`${issuer.issuer}/token`)} }`;
  return {
    topLevel: [front],
    upstream: [`auth: { clientCredentials: ${client} }`],
    clientHeaders,
    async stop(notes) {
      // One request for the whole target shows the token was cached; more would be a cost this bench should see.
      notes.push(`${issuer.tokenCounts().total} token request(s) to the auth-server fixture`);
      await issuer.close();
    },
  };
}
