// The task dashboard's page: polls the JSON API beside it (./api/) and renders what it says. Every piece of data
// goes into the page with textContent, never as markup. With auth on, the admin credential the operator types is
// kept in this tab's sessionStorage and sent as a Bearer token. The approvals view asks the gateway's own
// approvers' API (/approvals, same origin, same credential) on a poll of its own, so an approver who is not an
// admin still sees and decides the calls they may decide while the task list asks for an admin's key.
/* global document, window, location, history, sessionStorage, fetch, setTimeout, clearTimeout, URL, URLSearchParams */
'use strict';

const API = new URL('api/', location.href);
/** The approvers' API: a fixed path on the gateway's own origin (approvals-api.ts), not under the dashboard's. */
const APPROVALS = '/approvals';
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
  constructor(status, message, body = {}) {
    super(message);
    this.status = status;
    this.body = body;
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
  if (!response.ok) throw new Refused(response.status, body.error || `HTTP ${response.status}`, body);
  return body;
}

// ---- credentials ----

function askForCredential(status, message) {
  state.paused = true;
  $('main').hidden = true;
  $('detail').hidden = true;
  $('auth').hidden = false;
  $('auth-reason').textContent = status === 403
    ? `This credential is not an admin here (${message}). Use an admin API key or token to see the tasks; the approvals it may decide are listed below.`
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
  refreshApprovals();
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
  if (document.hidden) return;
  refresh();
  refreshApprovals();
});

// ---- approvals: the held calls this credential may decide ----

/**
 * The list is kept, not rebuilt: an item's comment field and focus survive the poll. `items` maps a task id to its
 * list item; `kept` holds the ids whose decision this tab sent (their record or refusal stays until dismissed).
 */
const approvals = { timer: undefined, items: new Map(), kept: new Set(), ids: 0, inFlight: false, again: false };

/** "in 59m 10s", or "passed" once the deadline is behind. */
function until(ms) {
  return ms > 0 ? `in ${age(ms)}` : 'passed';
}

/**
 * One held call. The item is bound to its call's digest: Approve and Deny send it, so a decision holds only for
 * the arguments on screen. `changed`: the call under this task id is not the one this tab showed before.
 */
function approvalItem(view, changed = false) {
  const heading = `approval-${++approvals.ids}`;
  const item = el('li', undefined, { class: 'approval', 'data-task-id': view.taskId, 'data-digest': view.digest ?? '', 'data-state': 'pending', 'aria-labelledby': heading });
  const fields = el('dl');
  field(fields, 'Requested by', view.principal);
  fields.append(el('dt', 'Age'), el('dd', undefined, { class: 'age' }), el('dt', 'Deadline'), el('dd', undefined, { class: 'deadline' }));
  if (view.upstreamTool !== undefined && view.upstreamTool !== view.tool) field(fields, 'Upstream tool', view.upstreamTool);
  field(fields, 'Task', view.taskId);

  const comment = el('input', undefined, { type: 'text', name: 'comment', maxlength: '1000', autocomplete: 'off', class: 'comment' });
  const approve = el('button', 'Approve', { type: 'button', class: 'approve' });
  const deny = el('button', 'Deny', { type: 'button', class: 'deny danger' });
  // Buttons, not submit buttons: Enter in the comment field must not approve (the form's default button would).
  const form = el('form', undefined, { class: 'decision', 'aria-label': `Decide ${view.tool}` },
    el('label', 'Comment (optional)', {}, comment), approve, deny);
  form.addEventListener('submit', (event) => event.preventDefault());
  approve.addEventListener('click', () => decide(item, 'approve'));
  deny.addEventListener('click', () => decide(item, 'deny'));

  item.append(
    el('h3', undefined, { id: heading, class: 'approval-title' }, el('span', view.tool, { class: 'tool' }), el('span', ` on ${view.upstream}`, { class: 'muted' })),
    ...(changed ? [el('p', 'This call changed since it was first shown here: its arguments below are the new ones.', { class: 'changed', role: 'alert' })] : []),
    fields,
    el('p', 'Arguments, exactly as the upstream will get them', { class: 'label' }),
    // Text, never markup: whatever the caller put in the arguments is shown as it is.
    el('pre', JSON.stringify(view.arguments ?? {}, null, 2), { class: 'arguments' }),
    form,
    el('p', undefined, { class: 'outcome', role: 'status' }),
  );
  return item;
}

/** What changes between polls: the age and the time left. */
function updateApprovalItem(item, view, now) {
  const ageCell = item.querySelector('dd.age');
  ageCell.textContent = age(view.ageMs);
  ageCell.title = new Date(view.createdMs).toISOString();
  const deadline = item.querySelector('dd.deadline');
  deadline.textContent = `${new Date(view.deadlineMs).toLocaleString()} (${until(view.deadlineMs - now)})`;
  deadline.title = view.deadline;
}

/** A decided record in words: "Denied by key:ops at 10:00:01: not during the freeze". */
function decisionText(record) {
  const verb = record.status === 'approved' ? 'Approved' : record.status === 'denied' ? 'Denied' : record.status === 'expired' ? 'Expired' : `Ended (${record.status ?? record.taskStatus})`;
  const by = record.decidedBy === undefined ? '' : ` by ${record.decidedBy}`;
  const when = record.decidedMs === undefined ? '' : ` at ${new Date(record.decidedMs).toLocaleTimeString()}`;
  const comment = record.comment === undefined ? '' : `: ${record.comment}`;
  return `${verb}${by}${when}${comment}`;
}

async function decide(item, decision) {
  const taskId = item.dataset.taskId;
  const form = item.querySelector('form.decision');
  const outcome = item.querySelector('.outcome');
  const comment = form.querySelector('input.comment').value.trim();
  for (const button of form.querySelectorAll('button')) button.disabled = true;
  outcome.classList.remove('error');
  outcome.textContent = decision === 'approve' ? 'Approving…' : 'Denying…';
  approvals.kept.add(taskId);
  try {
    // The digest of the call on screen: if the call changed since, the gateway decides nothing (409).
    const body = JSON.stringify({ decision, digest: item.dataset.digest, ...(comment ? { comment } : {}) });
    const answer = await api(`${APPROVALS}/${encodeURIComponent(taskId)}`, { method: 'POST', body });
    item.dataset.state = 'decided';
    item.dataset.decision = answer.approval.status;
    outcome.textContent = decisionText(answer.approval);
    form.remove();
  } catch (error) {
    if (!(error instanceof Refused) || error.status >= 500 || error.status === 401) {
      // Nothing was decided: the approver may try again.
      approvals.kept.delete(taskId);
      for (const button of form.querySelectorAll('button')) button.disabled = false;
      outcome.classList.add('error');
      outcome.textContent = error.message;
      if (error instanceof Refused && error.status === 401) handle(error);
      return;
    }
    // The call changed under this task id since it was shown: nothing was decided; show it as it stands now.
    if (error.status === 409 && error.body.reason === 'changed' && error.body.approval !== undefined) {
      approvals.kept.delete(taskId);
      replaceApprovalItem(item, error.body.approval);
      return;
    }
    // 403 (not an approver of this tool, or the caller's own call), 404, 409 (decided already, ended, past its
    // deadline): there is nothing left for this credential to decide here.
    item.dataset.state = 'refused';
    item.dataset.refusal = String(error.status);
    outcome.classList.add('error');
    const record = error.body.approval;
    if (record !== undefined) item.dataset.decision = record.status;
    outcome.textContent = record === undefined ? error.message : `${error.message}. ${decisionText(record)}`;
    form.remove();
  }
  item.append(dismissButton(item));
  renderApprovalsState();
  if (!state.paused) refresh();
}

function dismissButton(item) {
  const button = el('button', 'Dismiss', { type: 'button', class: 'dismiss' });
  button.addEventListener('click', () => {
    approvals.kept.delete(item.dataset.taskId);
    approvals.items.delete(item.dataset.taskId);
    item.remove();
    renderApprovalsState();
  });
  return button;
}

/** Puts a freshly built item for `view` (a call that changed under its task id) where `item` was. */
function replaceApprovalItem(item, view) {
  const fresh = approvalItem(view, true);
  approvals.items.set(view.taskId, fresh);
  updateApprovalItem(fresh, view, Date.now());
  item.replaceWith(fresh);
  renderApprovalsState();
  return fresh;
}

function renderApprovals(page) {
  const list = $('approval-list');
  const pending = new Set(page.approvals.map((view) => view.taskId));
  for (const [taskId, item] of approvals.items) {
    if (pending.has(taskId) || approvals.kept.has(taskId)) continue;
    // Decided elsewhere, cancelled or expired: gone from the pending list, and nothing this tab did.
    item.remove();
    approvals.items.delete(taskId);
  }
  let position = 0;
  for (const view of page.approvals) {
    let item = approvals.items.get(view.taskId);
    if (item === undefined) {
      item = approvalItem(view);
      approvals.items.set(view.taskId, item);
    } else if (item.dataset.state === 'pending' && item.dataset.digest !== (view.digest ?? '')) {
      // Another call under the same task id: rebuilt, so the arguments on screen are the ones Approve is bound to.
      item = replaceApprovalItem(item, view);
    }
    if (item.dataset.state === 'pending') updateApprovalItem(item, view, page.now);
    // Soonest deadline first, as the API orders them; moved only when out of place (a move loses focus).
    if (list.children[position] !== item) list.insertBefore(item, list.children[position] ?? null);
    position += 1;
  }
  renderApprovalsState();
}

function renderApprovalsState() {
  const items = [...$('approval-list').children];
  $('approvals-count').textContent = `(${items.filter((item) => item.dataset.state === 'pending').length} pending)`;
  $('approvals-empty').hidden = items.length > 0;
}

async function refreshApprovals() {
  // One request at a time, or two poll loops would run on: a call meanwhile (a new key) asks again once it is done.
  if (approvals.inFlight) {
    approvals.again = true;
    return;
  }
  clearTimeout(approvals.timer);
  approvals.inFlight = true;
  try {
    await refreshApprovalsOnce();
  } finally {
    approvals.inFlight = false;
  }
  if (approvals.again) {
    approvals.again = false;
    refreshApprovals();
  }
}

/** One poll: renders the list and plans the next, or hides the view where there are no approvals to decide. */
async function refreshApprovalsOnce() {
  try {
    const page = await api(APPROVALS);
    $('approvals').hidden = false;
    $('approvals-error').hidden = true;
    renderApprovals(page);
  } catch (error) {
    // 401: no credential yet (the task list asks for one, and a new one restarts this poll); 403: a gateway
    // without auth, where nobody is an approver; 404: no approvals API. The view stays hidden until then.
    if (error instanceof Refused && [401, 403, 404].includes(error.status)) {
      $('approvals').hidden = true;
      return;
    }
    $('approvals-error').hidden = false;
    $('approvals-error').textContent = error.message;
  }
  approvals.timer = setTimeout(refreshApprovals, POLL_MS);
}

const initial = new URLSearchParams(location.search);
$('filter-status').value = initial.get('status') ?? '';
$('filter-tool').value = initial.get('tool') ?? '';
window.taskgateDashboard = { refresh, refreshApprovals };
refresh();
refreshApprovals();
