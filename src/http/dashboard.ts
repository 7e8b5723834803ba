// The task dashboard: a static page at `dashboard.path` (index.html, app.js, app.css from ./dashboard/, read once
// and served from memory) and its JSON API under `<path>/api/`, behind admin access. The page holds no data: it
// asks the API, which refuses without an admin credential when auth is on, and then the page asks for a key. Its
// approvals view asks the approvers' API (/approvals, approvals-api.ts), which admits approvers, admins or not.
// Assets are four fixed files; serving them needs no static-file library. Its Connections view (connections.js) asks
// the per-user consent routes (/connections, consent/connections-api.ts) as the person signed in at this browser.
import { readFileSync } from 'node:fs';
import type { FastifyInstance, FastifyPluginAsync, FastifyReply } from 'fastify';
import { adminAccess, type AdminAccessOptions } from './admin-access.js';
import { registerDashboardApi, type DashboardApiDeps } from './dashboard-api.js';

export interface DashboardOptions extends DashboardApiDeps, Omit<AdminAccessOptions, 'endpoint' | 'logger'> {
  /** `dashboard.path`. */
  path: string;
}

const ASSETS_DIR = new URL('./dashboard/', import.meta.url);
const ASSETS = {
  'index.html': 'text/html; charset=utf-8',
  'app.js': 'text/javascript; charset=utf-8',
  'connections.js': 'text/javascript; charset=utf-8',
  'app.css': 'text/css; charset=utf-8',
} as const;

/**
 * Same-origin everything, no inline script or style, no framing: data is rendered with textContent, and this
 * makes a mistake there inert too.
 */
const PAGE_HEADERS = {
  'content-security-policy': "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-cache',
};

/** The dashboard's routes; register it only when `dashboard.enabled`. */
export const dashboardPlugin: FastifyPluginAsync<DashboardOptions> = async (app: FastifyInstance, options: DashboardOptions) => {
  const base = options.path.endsWith('/') ? options.path : `${options.path}/`;
  // Relative asset and API URLs resolve under the directory: `/ui` goes to `/ui/`.
  if (base !== options.path) app.get(options.path, async (_request, reply) => reply.redirect(base, 308));
  for (const [name, type] of Object.entries(ASSETS)) {
    const body = readFileSync(new URL(name, ASSETS_DIR));
    const send = async (_request: unknown, reply: FastifyReply) => reply.headers(PAGE_HEADERS).type(type).send(body);
    app.get(name === 'index.html' ? base : `${base}${name}`, send);
  }
  // The API in a context of its own: the admin hook and the JSON error handler apply to its routes only.
  await app.register(async (api) => {
    api.addHook('onRequest', adminAccess({ ...options, endpoint: 'dashboard' }));
    api.addHook('onSend', async (_request, reply) => {
      reply.header('cache-control', 'no-store');
    });
    registerDashboardApi(api, `${base}api/`, options);
  });
};
