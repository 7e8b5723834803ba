// The dashboard's Connections view: the upstreams that act as each user at their own account (issue 41), for the
// person signed in at this browser (the gateway's session cookie, set by its sign-in at the front door: never the
// admin credential this page may keep, which is not a person's). GET /connections lists them, with a link to
// connect each one that is not, and Disconnect sends DELETE /connections/{upstream} from this page (same origin:
// the gateway refuses a browser's delete from anywhere else). Asked again when the tab comes back into view (a
// connection made in another tab) and after a disconnect, not on a timer: a listing of an unconnected upstream
// hands out a link (the replica's open one, else a new one). Every value goes in with textContent or as an
// attribute checked first.
/* global document, location, fetch, URL, $, el */
'use strict';

(() => {
  const CONNECTIONS = '/connections';
  // `$` and `el` are app.js's (loaded first, same page).
  const view = { inFlight: false };

  /** Only an http(s) link is ever put in an href. */
  function safeHref(url) {
    try {
      const parsed = new URL(url, location.href);
      return parsed.protocol === 'https:' || parsed.protocol === 'http:' ? parsed.href : undefined;
    } catch {
      return undefined;
    }
  }

  function showSignIn() {
    $('connections').hidden = false;
    $('connections-signin').hidden = false;
    $('connection-list').replaceChildren();
    $('connections-empty').hidden = true;
    $('connections-signin-link').setAttribute('href', `/oauth/login?returnTo=${encodeURIComponent(location.pathname + location.search)}`);
  }

  function showError(message) {
    $('connections-error').hidden = false;
    $('connections-error').textContent = message;
  }

  function statusText(connection) {
    if (!connection.connected) return 'not connected';
    const scopes = connection.scopes.length > 0 ? ` · ${connection.scopes.join(' ')}` : '';
    const expires = connection.expiresAt ? ` · token until ${new Date(connection.expiresAt).toLocaleString()}` : '';
    return `connected${scopes}${expires}`;
  }

  function connectionItem(connection) {
    const item = el('li', undefined, { class: 'connection', 'data-upstream': connection.upstream, 'data-connected': String(connection.connected) },
      el('strong', connection.upstream, { class: 'upstream' }),
      el('span', statusText(connection), { class: 'muted state' }));
    const href = connection.connectUrl === undefined ? undefined : safeHref(connection.connectUrl);
    if (!connection.connected && href !== undefined) {
      item.append(el('a', 'Connect', { class: 'button connect', href, target: '_blank', rel: 'noopener noreferrer' }));
    }
    if (connection.connected) {
      const button = el('button', 'Disconnect', { type: 'button', class: 'disconnect danger' });
      button.addEventListener('click', () => disconnect(connection.upstream, button));
      item.append(button);
    }
    return item;
  }

  async function disconnect(upstream, button) {
    button.disabled = true;
    try {
      const response = await fetch(`${CONNECTIONS}/${encodeURIComponent(upstream)}`, { method: 'DELETE', credentials: 'same-origin' });
      if (response.status === 401) return showSignIn();
      if (!response.ok && response.status !== 404) {
        const body = await response.json().catch(() => ({}));
        showError(body.error || `HTTP ${response.status}`);
      }
    } catch (error) {
      showError(error.message);
    }
    await refreshConnections();
  }

  async function refreshConnections() {
    if (view.inFlight) return;
    view.inFlight = true;
    try {
      const response = await fetch(CONNECTIONS, { credentials: 'same-origin', headers: { accept: 'application/json' } });
      // No such routes (nothing acts as each user here): the view stays hidden.
      if (response.status === 404) return;
      if (response.status === 401) return showSignIn();
      const body = await response.json().catch(() => ({}));
      if (!response.ok) return showError(body.error || `HTTP ${response.status}`);
      $('connections').hidden = false;
      $('connections-signin').hidden = true;
      $('connections-error').hidden = true;
      $('connection-list').replaceChildren(...body.connections.map(connectionItem));
      $('connections-empty').hidden = body.connections.length > 0;
    } catch (error) {
      showError(error.message);
    } finally {
      view.inFlight = false;
    }
  }

  document.addEventListener('visibilitychange', () => {
    if (!document.hidden) refreshConnections();
  });
  refreshConnections();
})();
