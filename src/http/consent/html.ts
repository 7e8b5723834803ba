// The pages of per-user consent as documents: every value escaped, one small inline style, no script, and headers
// that keep the page to itself (no framing, no referrer carrying a link or code onwards, never cached). A form may
// go only to the gateway and to the authorization server the page names.
import type { FastifyReply } from 'fastify';

/** Text made safe for HTML content and quoted attribute values. */
export function escapeHtml(value: string): string {
  return value.replace(/[&<>"'`]/g, (c) => ENTITIES[c] as string);
}

/** The usual entities (what any reader of the page decodes), the backtick by number. */
const ENTITIES: Readonly<Record<string, string>> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;', '`': '&#96;' };

/** The headers of every page; `formActions`: origins a form on the page may submit to, besides the gateway. */
export function pageHeaders(formActions: readonly string[] = []): Record<string, string> {
  const formAction = [...formActions, "'self'"].join(' ');
  return {
    'content-security-policy': `default-src 'none'; style-src 'self' 'unsafe-inline'; base-uri 'none'; frame-ancestors 'none'; form-action ${formAction}`,
    'x-frame-options': 'DENY',
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'no-referrer',
    'cache-control': 'no-store',
  };
}

const STYLE = [
  'body{font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1d2330;background:#f8f9fb;margin:0}',
  'main{max-width:560px;margin:48px auto;background:#fff;border:1px solid #e4e7ec;border-radius:8px;padding:24px 28px}',
  'h1{font-size:20px;margin:0 0 12px}code{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:13px}',
  '.muted{color:#667085}.scopes li{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:13px}',
  'a.button{display:inline-block;margin:12px 0;padding:8px 16px;border-radius:6px;background:#2457d6;color:#fff;text-decoration:none}',
  '.error{color:#b42318}',
].join('');

export interface Page {
  status: number;
  title: string;
  /** Markup, every value in it already escaped (escapeHtml). */
  body: string;
  formActions?: readonly string[];
}

/** The whole document of a page. */
export function renderPage(page: Pick<Page, 'title' | 'body'>): string {
  return [
    '<!doctype html>',
    '<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">',
    '<meta name="referrer" content="no-referrer">',
    `<title>${escapeHtml(page.title)} · taskgate</title><style>${STYLE}</style></head>`,
    `<body><main>\n${page.body}\n</main></body></html>\n`,
  ].join('\n');
}

/** Sends `page` with its status and headers; `cookies`: Set-Cookie values to send with it. */
export function sendPage(reply: FastifyReply, page: Page, cookies: readonly string[] = []): FastifyReply {
  if (cookies.length > 0) void reply.header('set-cookie', [...cookies]);
  return reply.code(page.status).headers(pageHeaders(page.formActions)).type('text/html; charset=utf-8').send(renderPage(page));
}

/** A 302 that keeps nothing and carries no referrer (an authorization request is in its Location). */
export function sendRedirect(reply: FastifyReply, location: string, cookies: readonly string[] = []): FastifyReply {
  if (cookies.length > 0) void reply.header('set-cookie', [...cookies]);
  return reply.code(302).headers({ location, 'cache-control': 'no-store', 'referrer-policy': 'no-referrer' }).send();
}
