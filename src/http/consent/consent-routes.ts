// The browser's side of a user's consent: GET /connect/{id} (the link a client showed: sign the browser in unless it
// is, check it is the user the link is for, show what is asked and where the browser goes, set the state cookie)
// and GET /oauth/callback (the authorization server's answer, completed by the consent core). A link opened in
// another user's browser ends here in a 403: the link stays unused and nothing is stored or sent anywhere.
import type { FastifyInstance } from 'fastify';
import { ConsentRefused, LINK_TTL_MS, type ConsentPage } from '../../consent/ports.js';
import { UpstreamCredentialError } from '../../identity/credential-error.js';
import { clearCookie, cookieNames, cookieOf, setCookie } from './cookies.js';
import { pageRoute, single, type ConsentHttpContext } from './context.js';
import { escapeHtml, sendPage } from './html.js';
import { LOGIN_PATH, startLogin } from './login-routes.js';
import { connectedPage, consentPage, consentRefusalPage, LINK_UNKNOWN, refusalPage } from './pages.js';
import { CONSENT_CALLBACK_PATH } from '../../consent/settings.js';

export const CONNECT_PATH = '/connect';
/** What a link id can be (opaque, URL-safe); anything else is not looked up. */
const LINK_ID = /^[A-Za-z0-9_-]{8,256}$/;

export function registerConsentRoutes(app: FastifyInstance, context: ConsentHttpContext): void {
  const { connections, logger } = context.deps;

  app.get(`${CONNECT_PATH}/:id`, pageRoute(context, `${CONNECT_PATH}/:id`, async (request, reply) => {
    const { id } = request.params as { id: string };
    if (!LINK_ID.test(id) || (await connections.link(id)) === undefined) return sendPage(reply, LINK_UNKNOWN);
    const principal = await context.sessions.browserPrincipal(request);
    const here = `${CONNECT_PATH}/${id}`;
    if (principal === undefined) return startLogin(context, reply, here);
    let page: ConsentPage;
    try {
      page = await connections.begin(id, principal);
    } catch (error) {
      // The authorization server could not be found or registered with: the link is still unused, for another try.
      if (error instanceof UpstreamCredentialError) {
        return sendPage(reply, refusalPage(502, 'Authorization server unavailable', `The authorization server of ${error.upstream} cannot be reached or refused the gateway now. Nothing was sent; this link still works: try again in a moment.`));
      }
      if (!(error instanceof ConsentRefused)) throw error;
      logger.debug({ principal, reason: error.reason }, 'a connect link was refused');
      const refusal = consentRefusalPage(error.reason);
      // Someone else is signed in here: they may sign in as the user the link is for (it stays unused until then).
      if (error.reason === 'wrong_user') refusal.body += `\n<p><a href="${escapeHtml(`${LOGIN_PATH}?returnTo=${encodeURIComponent(here)}`)}">Sign in as another user</a></p>`;
      return sendPage(reply, refusal);
    }
    const secure = context.secure();
    const cookie = setCookie(cookieNames(secure).consent, page.browserCookie, { path: CONSENT_CALLBACK_PATH, maxAgeS: Math.floor(LINK_TTL_MS / 1000), secure });
    return sendPage(reply, consentPage(page, principal), [cookie]);
  }));

  app.get(CONSENT_CALLBACK_PATH, pageRoute(context, CONSENT_CALLBACK_PATH, async (request, reply) => {
    const secure = context.secure();
    const name = cookieNames(secure).consent;
    const cleared = clearCookie(name, CONSENT_CALLBACK_PATH, secure);
    const query = request.query;
    try {
      const done = await connections.complete({
        state: single(query, 'state'),
        code: single(query, 'code'),
        error: single(query, 'error'),
        iss: single(query, 'iss'),
        cookie: cookieOf(request, name),
      });
      return sendPage(reply, connectedPage(done.upstream), [cleared]);
    } catch (error) {
      if (!(error instanceof ConsentRefused)) throw error;
      logger.debug({ reason: error.reason }, 'a consent callback was refused');
      return sendPage(reply, consentRefusalPage(error.reason), [cleared]);
    }
  }));
}
