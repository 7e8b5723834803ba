// The task dashboard's page: polls the JSON API beside it (./api/) and renders what it says. Every piece of data
// goes into the page with textContent, never as markup. With auth on, the admin credential the operator types is
// kept in this tab's sessionStorage and sent as a Bearer token.
/* global document, window, location, history, sessionStorage, fetch, setTimeout, clearTimeout, URL, URLSearchParams */
'use strict';

const API = new URL('api/', location.href);
const TOKEN_KEY = 'taskgate.dashboard.token';
const POLL_MS = 2000;
const PAGE = 50;
const TERMINAL = new Set(['completed', 'failed', 'cancelled']);
/** How long an armed Cancel button waits for its confirming click. */
const ARM_MS = 10_000;

const $ = (id) => document.getElementById(id);
const state = { cursor: undefined, shown: PAGE, selected: undefined, timer: undefined, tools: new Set(), paused: false, armed: undefined };

/** An element with text content and attributes; children appended as given. */
function el(tag, text, attrs = {}, ...children) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, value);
  for (const child of children) node.append(child);
  return node;
}

class Refused extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

async function api(path, options = {}) {
  const headers = { accept: 'application/json' };
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers.authorization = `Bearer ${token}`;
  // A write goes as JSON: the API refuses any other body, which a page on another origin could send unasked.
  const writes = options.method !== undefined && options.method !== 'GET';
  if (writes) headers['content-type'] = 'application/json';
  const response = await fetch(new URL(path, API), { ...options, headers, ...(writes ? { body: options.body ?? '{}' } : {}) });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Refused(response.status, body.error || `HTTP ${response.status}`);
  return body;
}

// ---- credentials ----

function askForCredential(status, message) {
  state.paused = true;
  $('main').hidden = true;
  $('detail').hidden = true;
  $('auth').hidden = false;
  $('auth-reason').textContent = status === 403
    ? `This credential is not an admin here (${message}). Use an admin API key or token.`
    : 'This gateway needs an admin API key or access token to show its tasks.';
  $('auth-token').focus();
}

$('auth-form').addEventListener('submit', (event) => {
  event.preventDefault();
  sessionStorage.setItem(TOKEN_KEY, $('auth-token').value.trim());
  $('auth-token').value = '';
  $('auth').hidden = true;
  $('main').hidden = false;
  state.paused = false;
  refresh();
});

$('sign-out').addEventListener('click', () => {
  sessionStorage.removeItem(TOKEN_KEY);
  location.reload();
});

// ---- filters (kept in the address, so a reload or a shared link keeps them) ----

function filters() {
  return { status: $('filter-status').value, tool: $('filter-tool').value.trim() };
}

function filtersChanged() {
  const params = new URLSearchParams();
  const { status, tool } = filters();
  if (status) params.set('status', status);
  if (tool) params.set('tool', tool);
  history.replaceState(null, '', params.size ? `?${params}` : location.pathname);
  state.shown = PAGE;
  refresh();
}

$('filter-status').addEventListener('change', filtersChanged);
$('filter-tool').addEventListener('change', filtersChanged);
// Enter in the tool field: apply it here, not by a form submission (which would load the page again).
$('filters').addEventListener('submit', (event) => {
  event.preventDefault();
  filtersChanged();
});
$('filter-clear').addEventListener('click', () => {
  $('filter-status').value = '';
  $('filter-tool').value = '';
  filtersChanged();
});
$('more').addEventListener('click', () => loadMore());

// ---- the task list ----

function age(ms) {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
  return `${Math.floor(s / 86400)}d ${Math.floor((s % 86400) / 3600)}h`;
}

function statusBadge(status) {
  return el('span', status, { class: 'status', 'data-status': status });
}

function cancelButton(task) {
  // Two steps, no modal: the first click arms (for ARM_MS, kept across refreshes), the second sends.
  const armed = state.armed?.taskId === task.taskId && state.armed.until > Date.now();
  const button = el('button', armed ? 'Confirm cancel' : 'Cancel', { type: 'button', class: armed ? 'cancel danger confirming' : 'cancel danger', 'data-task-id': task.taskId });
  button.addEventListener('click', async (event) => {
    event.stopPropagation();
    if (!button.classList.contains('confirming')) {
      state.armed = { taskId: task.taskId, until: Date.now() + ARM_MS };
      button.classList.add('confirming');
      button.textContent = 'Confirm cancel';
      return;
    }
    state.armed = undefined;
    button.disabled = true;
    try {
      await api(`tasks/${encodeURIComponent(task.taskId)}/cancel`, { method: 'POST' });
    } catch (error) {
      showError(error);
    }
    refresh();
  });
  return button;
}

function taskRow(task, now) {
  const row = el('tr', undefined, { 'data-task-id': task.taskId, 'data-status': task.status, 'data-tool': task.tool });
  if (task.taskId === state.selected) row.classList.add('selected');
  const message = task.message ?? (task.inputRequests ? `${task.inputRequests} input request(s) pending` : '');
  row.append(
    el('td', undefined, {}, statusBadge(task.status)),
    el('td', task.tool, { class: 'tool' }),
    el('td', task.upstream, { class: 'upstream' }),
    el('td', task.principal, { class: 'principal', title: task.principal }),
    el('td', age(now - task.createdMs), { class: 'age', title: new Date(task.createdMs).toISOString() }),
    el('td', message, { class: 'message', title: message }),
    el('td', undefined, { class: 'actions' }, ...(TERMINAL.has(task.status) || task.native ? [] : [cancelButton(task)])),
  );
  row.addEventListener('click', () => openDetail(task.taskId));
  return row;
}

function query(limit, cursor) {
  const params = new URLSearchParams({ limit: String(limit) });
  const { status, tool } = filters();
  if (status) params.set('status', status);
  if (tool) params.set('tool', tool);
  if (cursor) params.set('cursor', cursor);
  return `tasks?${params}`;
}

function rememberTools(tasks) {
  const before = state.tools.size;
  for (const task of tasks) state.tools.add(task.tool);
  if (state.tools.size === before) return;
  $('tools').replaceChildren(...[...state.tools].sort().map((tool) => el('option', undefined, { value: tool })));
}

function renderTasks(page, append) {
  const body = $('tasks').tBodies[0];
  const rows = page.tasks.map((task) => taskRow(task, page.now));
  if (append) body.append(...rows);
  else body.replaceChildren(...rows);
  rememberTools(page.tasks);
  state.cursor = page.nextCursor;
  $('more').hidden = page.nextCursor === undefined;
  $('empty').hidden = body.rows.length > 0;
}

async function loadMore() {
  try {
    const page = await api(query(PAGE, state.cursor));
    state.shown += page.tasks.length;
    renderTasks(page, true);
  } catch (error) {
    handle(error);
  }
}

// ---- a task's detail ----

function field(list, name, value) {
  if (value === undefined || value === null || value === '') return;
  list.append(el('dt', name), el('dd', value));
}

/** Whom the upstream sees for the task, and whether a run on another replica acts for its caller (while it can run). */
function identityFields(list, task, identity) {
  list.append(el('dt', 'Upstream sees'), el('dd', identity.summary, { id: 'detail-identity', 'data-mode': identity.mode, 'data-acts-as': identity.actsAs }));
  if (TERMINAL.has(task.status) || task.native) return;
  list.append(el('dt', 'Run elsewhere'), el('dd', identity.rerun.summary, { id: 'detail-rerun', 'data-outcome': identity.rerun.outcome }));
}

async function openDetail(taskId) {
  state.selected = taskId;
  for (const row of $('tasks').tBodies[0].rows) row.classList.toggle('selected', row.dataset.taskId === taskId);
  await refreshDetail();
}

$('detail-close').addEventListener('click', () => {
  state.selected = undefined;
  $('detail').hidden = true;
  for (const row of $('tasks').tBodies[0].rows) row.classList.remove('selected');
});

async function refreshDetail() {
  const taskId = state.selected;
  if (taskId === undefined) return;
  let detail;
  try {
    detail = await api(`tasks/${encodeURIComponent(taskId)}`);
  } catch (error) {
    if (error instanceof Refused && error.status === 404) {
      $('detail-fields').replaceChildren(el('dt', 'Gone'), el('dd', 'The task expired.'));
      return;
    }
    throw error;
  }
  if (state.selected !== taskId) return;
  const { task, identity, timeline, inputRequests, outcome, now } = detail;
  const panel = $('detail');
  panel.hidden = false;
  panel.dataset.taskId = task.taskId;
  panel.dataset.status = task.status;
  $('detail-id').textContent = task.taskId;

  const fields = el('dl');
  fields.append(el('dt', 'Status'), el('dd', undefined, {}, statusBadge(task.status)));
  field(fields, 'Status message', task.message);
  field(fields, 'Tool', task.tool);
  field(fields, 'Upstream', task.upstream);
  field(fields, 'Principal', task.principal);
  if (identity !== undefined) identityFields(fields, task, identity);
  field(fields, 'Protocol', task.era);
  field(fields, 'Created', `${new Date(task.createdMs).toLocaleString()} (${age(now - task.createdMs)} ago)`);
  field(fields, 'Updated', `${new Date(task.updatedMs).toLocaleString()} (${age(now - task.updatedMs)} ago)`);
  if (task.attempt > 1) field(fields, 'Attempt', task.attempt);
  if (task.queued) field(fields, 'Queued', 'waiting for a concurrency slot');
  if (task.native) field(fields, 'Runs on', 'the upstream itself (its own task)');
  $('detail-fields').replaceChildren(...fields.childNodes);
  $('detail-actions').replaceChildren(...(TERMINAL.has(task.status) || task.native ? [] : [cancelButton(task)]));

  $('timeline').replaceChildren(
    ...timeline.map((entry) =>
      el('li', undefined, { 'data-status': entry.status },
        statusBadge(entry.status),
        el('span', new Date(entry.atMs).toLocaleTimeString(), { class: 'when', title: new Date(entry.atMs).toISOString() }),
        ...(entry.message ? [el('span', entry.message, { class: 'what' })] : [])),
    ),
  );

  $('inputs-section').hidden = inputRequests.length === 0;
  $('inputs').replaceChildren(...inputRequests.map((request) =>
    el('li', undefined, {}, el('strong', request.method), ...(request.message ? [el('span', ` — ${request.message}`)] : []), el('pre', request.params))));

  $('outcome-section').hidden = outcome === undefined;
  if (outcome !== undefined) {
    $('outcome-title').textContent = outcome.kind === 'error' ? 'Error' : outcome.isError ? 'Result (tool error)' : 'Result';
    $('outcome').textContent = outcome.preview;
    $('outcome-note').textContent = outcome.truncated ? `Preview: the first ${outcome.preview.length} characters of ${outcome.bytes} bytes.` : '';
  }
}

// ---- upstream health ----

function renderUpstreams(upstreams) {
  $('upstreams').replaceChildren(...upstreams.map((u) =>
    el('li', u.name, { 'data-state': u.state, title: [u.transport, u.state, u.error].filter(Boolean).join(' · ') })));
}

// ---- polling ----

function showError(error) {
  $('error').hidden = false;
  $('error').textContent = error.message;
}

function handle(error) {
  if (error instanceof Refused && (error.status === 401 || error.status === 403)) askForCredential(error.status, error.message);
  else showError(error);
}

async function refresh() {
  clearTimeout(state.timer);
  if (state.paused) return;
  try {
    const [page, health] = await Promise.all([api(query(Math.min(state.shown, 200))), api('upstreams')]);
    $('error').hidden = true;
    renderTasks(page, false);
    renderUpstreams(health.upstreams);
    await refreshDetail();
    $('sign-out').hidden = !sessionStorage.getItem(TOKEN_KEY);
    $('refreshed').textContent = `updated ${new Date().toLocaleTimeString()}`;
  } catch (error) {
    handle(error);
  }
  if (!state.paused) state.timer = setTimeout(refresh, POLL_MS);
}

document.addEventListener('visibilitychange', () => {
  if (!document.hidden) refresh();
});

const initial = new URLSearchParams(location.search);
$('filter-status').value = initial.get('status') ?? '';
$('filter-tool').value = initial.get('tool') ?? '';
window.taskgateDashboard = { refresh };
refresh();
