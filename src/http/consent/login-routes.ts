// The front door's browser sign-in as routes: GET /oauth/login?returnTo=<path> starts one (the dashboard's
// Connections view links here), startLogin() starts one from another route (a connect link opened by a browser
// not signed in), and GET /oauth/login/callback finishes it: the browser session cookie is set and the browser goes
// back where it came from (a same-origin path only).
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { clearCookie, cookieNames, cookieOf, setCookie } from './cookies.js';
import { pageRoute, single, type ConsentHttpContext } from './context.js';
import { LoginRefused } from './front-door-login.js';
import { sendPage, sendRedirect } from './html.js';
import { refusalPage, signedInPage } from './pages.js';
import { LOGIN_CALLBACK_PATH } from '../../consent/settings.js';
import { safeReturnTo } from './return-to.js';

export const LOGIN_PATH = '/oauth/login';
/** The login cookie lives as long as its flow. */
const LOGIN_COOKIE_MAX_AGE_S = 600;

/** Sends the browser to the issuer to sign in, then back to `returnTo` (already checked same-origin). */
export async function startLogin(context: ConsentHttpContext, reply: FastifyReply, returnTo: string | undefined): Promise<FastifyReply> {
  try {
    const { location, cookie } = await context.login.start(returnTo);
    const secure = context.secure();
    return sendRedirect(reply, location, [setCookie(cookieNames(secure).login, cookie, { path: LOGIN_CALLBACK_PATH, maxAgeS: LOGIN_COOKIE_MAX_AGE_S, secure })]);
  } catch (error) {
    if (error instanceof LoginRefused) return sendPage(reply, refusalPage(error.status, error.heading, error.message));
    throw error;
  }
}

export function registerLoginRoutes(app: FastifyInstance, context: ConsentHttpContext): void {
  app.get(LOGIN_PATH, pageRoute(context, LOGIN_PATH, async (request, reply) => {
    const asked = single(request.query, 'returnTo');
    const returnTo = safeReturnTo(asked);
    if (asked !== undefined && returnTo === undefined) {
      return sendPage(reply, refusalPage(400, 'Bad return address', 'returnTo must be a path on this gateway.'));
    }
    return startLogin(context, reply, returnTo);
  }));

  app.get(LOGIN_CALLBACK_PATH, pageRoute(context, LOGIN_CALLBACK_PATH, async (request: FastifyRequest, reply) => {
    const secure = context.secure();
    const names = cookieNames(secure);
    const cleared = clearCookie(names.login, LOGIN_CALLBACK_PATH, secure);
    const query = new URL(request.raw.url ?? '/', 'http://gateway.invalid').searchParams;
    try {
      const { principal, returnTo } = await context.login.finish(query, cookieOf(request, names.login));
      const session = await context.sessions.issue(principal);
      context.deps.logger.info({ audit: 'browser.signed_in', principal }, 'a browser signed in');
      const next = safeReturnTo(returnTo);
      return next === undefined ? sendPage(reply, signedInPage(principal), [cleared, session]) : sendRedirect(reply, next, [cleared, session]);
    } catch (error) {
      if (!(error instanceof LoginRefused)) throw error;
      return sendPage(reply, refusalPage(error.status, error.heading, error.message), [cleared]);
    }
  }));
}
