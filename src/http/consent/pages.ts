// What each page of per-user consent says: the consent page (what is asked, of which server, before the browser is
// sent there), the answers of the callbacks, and the refusals. Each returns a Page (html.ts), values escaped.
import type { ConsentPage, ConsentRefusal } from '../../consent/ports.js';
import { escapeHtml, type Page } from './html.js';

/** Who is signed in, as a person reads it: the subject of an OAuth principal, else the principal. */
export function displayName(principal: string): string {
  const hash = principal.indexOf('#');
  return principal.startsWith('oauth:') && hash > 0 ? principal.slice(hash + 1) : principal;
}

/** The page a link opens: the upstream, where the browser goes (the server's host with its port), and the scopes. */
export function consentPage(page: ConsentPage, principal: string): Page {
  const upstream = escapeHtml(page.upstream);
  const host = escapeHtml(page.serverHost);
  const scopes = page.scopes.length === 0
    ? '<p class="muted">No particular scopes are asked for: the server decides what it grants.</p>'
    : `<p>It asks for these scopes:</p>\n<ul class="scopes">${page.scopes.map((s) => `<li>${escapeHtml(s)}</li>`).join('')}</ul>`;
  return {
    status: 200,
    title: `Connect ${page.upstream}`,
    formActions: [new URL(page.authorizeUrl).origin],
    body: [
      `<h1>Connect <span id="upstream">${upstream}</span></h1>`,
      `<p>Signed in as <strong>${escapeHtml(displayName(principal))}</strong>.</p>`,
      `<p>To act as you at <strong>${upstream}</strong>, the gateway needs your consent at its authorization server, `,
      `<strong id="server-host">${host}</strong> <span class="muted">(${escapeHtml(page.issuer)})</span>.</p>`,
      scopes,
      `<p><a class="button" id="continue" href="${escapeHtml(page.authorizeUrl)}">Continue to ${host}</a></p>`,
      '<p class="muted">If you did not ask for this, close this tab: nothing is connected until you approve at that server.</p>',
    ].join('\n'),
  };
}

export function connectedPage(upstream: string): Page {
  return {
    status: 200,
    title: `Connected ${upstream}`,
    body: `<h1>Connected <span id="upstream">${escapeHtml(upstream)}</span></h1>\n<p>Your account is connected. You can close this tab.</p>`,
  };
}

export function signedInPage(principal: string): Page {
  return { status: 200, title: 'Signed in', body: `<h1>Signed in</h1>\n<p>Signed in as <strong>${escapeHtml(displayName(principal))}</strong>. You can close this tab.</p>` };
}

/** A refusal: `status`, a heading and a sentence; nothing of a token, code, state or cookie. */
export function refusalPage(status: number, heading: string, sentence: string): Page {
  return { status, title: heading, body: `<h1 class="error">${escapeHtml(heading)}</h1>\n<p>${escapeHtml(sentence)}</p>` };
}

export const LINK_UNKNOWN = refusalPage(404, 'Link not found', 'This link is unknown, has expired or was already used. Ask again from your client for a new one.');

/** Each refusal of a link, a consent or a callback as the user reads it (the contract: a 4xx each). */
const REFUSALS: Readonly<Record<ConsentRefusal, [status: number, heading: string, sentence: string]>> = {
  link_unknown: [404, 'Link not found', 'This link is unknown, has expired or was already used. Ask again from your client for a new one.'],
  wrong_user: [403, 'Signed in as someone else', 'This link was made for another user than the one signed in at this browser. Nothing was connected; sign in as the user who asked, or ask that user to open it.'],
  state_unknown: [400, 'Unknown or used consent', 'This answer from the authorization server matches no consent in progress: it expired or was already used. Start again from a new link.'],
  state_mismatch: [403, 'Another browser', 'This consent was started in another browser. Nothing was connected; open the link again in this one.'],
  issuer_mismatch: [400, 'Unexpected authorization server', 'The answer did not come from the authorization server the consent was sent to. Nothing was connected.'],
  denied: [403, 'Consent declined', 'The authorization server says the consent was not given. Nothing was connected.'],
  untrusted_server: [403, 'Authorization server not allowed', 'The gateway is not allowed to send you to this authorization server. Nothing was sent to it.'],
  exchange_failed: [400, 'Connection failed', 'The authorization server did not accept the consent it granted. Nothing was connected; try again from a new link.'],
};

export function consentRefusalPage(reason: ConsentRefusal): Page {
  const [status, heading, sentence] = REFUSALS[reason];
  return refusalPage(status, heading, sentence);
}

export const UNAVAILABLE = refusalPage(503, 'Try again shortly', 'The gateway cannot complete this now. Nothing was connected; try again in a moment.');
