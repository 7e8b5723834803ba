// The `tasks` section of the config schema: the task policy (defaults and per-tool rules), the answer a background
// call gets, and the task tools. Its checks compare a rule merged onto the defaults, the policy a tool really gets.
import { z } from 'zod';
import { backgroundSetting, PLAIN_CALLS } from './background.js';
import { DEFAULT_POLICY, DEFAULTS } from './defaults.js';
import { int, prefix, toolName } from './fields.js';
import { inlineValue, restate } from './key-docs.js';

export const TASK_MODES = ['forbidden', 'optional', 'required', 'always', 'never'] as const;
/** A policy's mode once the aliases are resolved (`always` is `required`, `never` is `forbidden`). */
export type TaskMode = Exclude<(typeof TASK_MODES)[number], 'always' | 'never'>;

const mode = z.enum(TASK_MODES).transform((m): TaskMode => (m === 'always' ? 'required' : m === 'never' ? 'forbidden' : m));

/** `retry` of the defaults or of a rule: the same keys, each described where it is. */
function retry(onLoss: string, maxAttempts: string) {
  return (
    z
      .strictObject({
        onLoss: z.boolean().describe(onLoss),
        maxAttempts: int(1).optional().meta({ description: maxAttempts, derivedDefault: '`2` with `onLoss: true`, else `1`' }),
      })
      // Retrying on loss means two attempts unless said otherwise.
      .transform((r) => ({ onLoss: r.onLoss, maxAttempts: r.maxAttempts ?? (r.onLoss ? 2 : 1) }))
      .optional()
  );
}

// Every field optional: used for `tasks.defaults` (merged onto DEFAULT_POLICY) and for rules (merged onto defaults).
const policyShape = {
  mode: mode.optional().describe(`\`forbidden\`: always synchronous; \`optional\`: a task when the client asks for one;
    \`required\`: callers must ask for a task, others are refused. Aliases: \`never\` = forbidden, \`always\` =
    required. An upstream that requires a task raises \`optional\` to \`required\`.`),
  ttlMs: int(1).optional().describe(`How long a task is kept after it is created, when the client asks no TTL; a
    client's TTL is clamped to \`maxTtlMs\`. At most \`maxTtlMs\`.`),
  maxTtlMs: int(1).optional().describe(`The longest TTL a client may get; a larger request is clamped and the granted
    TTL reported back.`),
  pollIntervalMs: int(1).optional().describe('The poll interval each task suggests to its client (`pollInterval`).'),
  maxRunMs: int(0).optional().describe("Hard deadline of a task's upstream call; 0 = none."),
  taskAfterMs: int(0).optional().describe(`2026-07-28 clients that declare the tasks extension, and \`plainCalls:
    background\`: wait this long for the upstream, answer with its result if it came, else with a task (0 = a task at
    once). Questions the upstream asks inside the window go out as MRTR rounds first.`),
  concurrency: int(0).optional().describe(`Running tasks per tool at once, across all replicas; more wait in
    \`working\`, queued in order, and start on whichever replica holds them when a slot frees. 0 = unlimited.`),
  maxTasksPerPrincipal: int(0).optional().describe(`Unfinished tasks one principal may hold, across all replicas; more
    are refused (-32603 \`Too many unfinished tasks ...\`). Without auth every client (all 2025 sessions and 2026-07-28
    clients) is one principal for it. 0 = unlimited.`),
  keepAliveProgressMs: int(0).optional().describe(`A plain tools/call (not a task) whose client sent a \`progressToken\`
    gets \`notifications/progress\` at least this often while the upstream is silent (values always increase; the
    upstream's own progress is rewritten where needed), so hosts that reset their request timeout on progress keep
    waiting; \`task_result\` too while it waits. 0 = off.`),
  plainCalls: z.enum(PLAIN_CALLS).optional().describe(`tools/call without a task asked for (2025 without
    \`params.task\`, 2026 without the tasks extension): \`wait\` = answer when the upstream does (with keep-alive
    progress); \`background\` = run it as a task and, past \`taskAfterMs\`, answer with a tool result naming it, to be
    fetched with the task tools. \`mode: forbidden\` wins.`),
  retry: retry(
    '`true`: run the call again on the replica that noticed, instead of failing the task. Only for tools that are safe to run twice.',
    'Executions in all, the first included.',
  ).describe('What happens to a task whose replica dies while running it.'),
};

// Each key of the defaults takes DEFAULT_POLICY's value when left out (build.ts merges them).
export const PolicyDefaultsSchema = z.strictObject(
  restate(policyShape, (key) => ({ derivedDefault: `\`${inlineValue(DEFAULT_POLICY[key])}\`` })),
);
// A rule's keys are the defaults' keys, each overriding its namesake for the tools the rule matches.
const ruleShape = restate(
  { ...policyShape, retry: retry('As `tasks.defaults.retry.onLoss`.', 'As `tasks.defaults.retry.maxAttempts`.') },
  (key) => ({ description: `Overrides \`tasks.defaults.${key}\` for the tools the rule matches.`, derivedDefault: `\`tasks.defaults.${key}\`` }),
);

// Rules only: holding every tool for approval is a rule `match: "*"` away, and says so where it is read.
export const ApprovalSchema = z
  .strictObject({
    approvers: z
      .array(z.string().trim().min(1, { error: 'expected a non-empty principal glob' }))
      .default(() => [])
      .describe(`Principal globs, as \`auth.access\` names them (\`key:ops-*\`, \`oauth:alice\`, bare):
    who may approve or deny. Checked against the config in force when they decide.`),
    scopes: z
      .array(z.string().trim().min(1, { error: 'expected a non-empty scope' }))
      .default(() => [])
      .describe('Credentials carrying any of these scopes may approve or deny too.'),
    timeoutMs: int(1).describe(`How long a held call waits for a decision. Past it the task fails saying the
    approval expired (any replica notices, whether anyone looks or not).`),
    allowSelf: z.boolean().default(false).describe('`true`: an approver may approve their own call. `false`: someone else must.'),
    onCallerGone: z.enum(['keep', 'cancel']).default('keep').describe(`Under \`plainCalls: wait\`, what a plain caller
      that stops waiting (its request cancelled, its own timeout, a disconnect) does to its held call: \`keep\` = the
      hold stays for the approvers and the call runs once approved, its result fetched with the task tools (listed under
      \`taskTools.enabled: auto\`); \`cancel\` = the task is cancelled with the request. \`tasks/cancel\` and
      \`task_cancel\` always cancel.`),
  })
  .superRefine((approval, ctx) => {
    if (approval.approvers.length === 0 && approval.scopes.length === 0) {
      ctx.addIssue({ code: 'custom', path: ['approvers'], input: approval.approvers, message: 'name at least one approver (a principal glob) or scope: otherwise nobody could ever approve' });
    }
  });

export const RuleSchema = z.strictObject({
  match: z.string().trim().min(1, { error: 'expected a non-empty glob on the exposed tool name' }).describe(`Glob (\`*\`
    any run of characters, \`?\` one) on the exposed tool name: prefix included, after any rename.`),
  ...ruleShape,
  approval: ApprovalSchema.optional().describe(`Hold every call to the matched tools until an approver decides
    (docs/approvals-and-webhooks.md): the caller gets a task at once, \`working\` and saying whom it waits for and until
    when; the upstream is called only after an approval, once, with the arguments that were approved. Needs \`auth\`;
    not with \`mode: forbidden\`. A rule with \`approval\` and no \`plainCalls\` of its own answers plain callers with
    \`plainCalls: background\` (a handle naming the task and the task tools): hosts time out long before people decide.`),
});

/** One task tool's own name; left out, the prefix makes it. */
const taskToolName = (kind: string, description: string) =>
  toolName.optional().meta({ description, derivedDefault: `\`<prefix>task_${kind}\`` });

export const TaskToolsSchema = z
  .strictObject({
    // `auto`: listed when any rule (or the defaults) says plainCalls: background.
    enabled: z.union([z.boolean(), z.literal('auto')]).default('auto').describe(`\`auto\`: listed when the defaults or
      any rule say \`plainCalls: background\`, or a rule holds calls for approval (its plain callers fetch results with
      them). \`false\` is refused while plain calls go to the background (a rule with \`approval\` does unless it says
      \`plainCalls: wait\`): those callers fetch their results with them.`),
    prefix: prefix.default(DEFAULTS.taskToolPrefix).describe(`Letters, digits, \`_\`, \`-\`, \`.\` and \`/\`. Their
      names: \`<prefix>task_result\`, \`<prefix>task_status\`, \`<prefix>task_cancel\`, \`<prefix>task_list\`,
      \`<prefix>task_delete\`.`),
    names: z
      .strictObject({
        result: taskToolName('result', "Name of the tool that waits for a task's end and returns its result."),
        status: taskToolName('status', `Name of the tool that returns a task's status, status message and what it waits
    for, at once.`),
        cancel: taskToolName('cancel', 'Name of the tool that cancels a task and its upstream call.'),
        list: taskToolName('list', "Name of the tool that lists the caller's tasks, newest first."),
        delete: taskToolName('delete', `Name of the tool that deletes an ended task and its result before their TTL (a running
    task must be cancelled first).`),
      })
      .prefault({})
      .describe(`Names one by one (1-128 letters, digits, \`_\`, \`-\`, \`.\` or \`/\`), instead of the
    prefix, e.g. \`{ result: get_job_result }\`.`),
    waitSeconds: int(0).default(DEFAULTS.taskToolWaitSeconds).describe('How long `task_result` waits for the task to end when the call does not say.'),
    maxWaitSeconds: int(1, 3_600).default(DEFAULTS.taskToolMaxWaitSeconds).describe(`The most \`task_result\` waits,
      whatever it is asked: keep it under your hosts' request timeouts. At least \`waitSeconds\`.`),
  })
  .superRefine((tools, ctx) => {
    if (tools.waitSeconds > tools.maxWaitSeconds) {
      ctx.addIssue({ code: 'custom', path: ['waitSeconds'], input: tools.waitSeconds, message: `must not exceed maxWaitSeconds (${tools.maxWaitSeconds})` });
    }
  });

export const TasksSchema = z
  .strictObject({
    defaults: PolicyDefaultsSchema.prefault({}).describe("Every tool's task policy where no rule says otherwise; each rule's fields override these."),
    rules: z.array(RuleSchema).default(() => []).describe(`Per-tool policy. The first rule whose \`match\` fits the
      exposed tool name wins; the fields it gives override \`tasks.defaults\`.`),
    immediateResponse: z.string().default(DEFAULTS.immediateResponse).describe(`Sent with each new task as
      \`_meta["io.modelcontextprotocol/model-immediate-response"]\`; \`""\` = not sent.`),
    taskTools: TaskToolsSchema.prefault({}).describe(`The tools hosts without tasks use to fetch background results:
      \`task_result\`, \`task_status\`, \`task_cancel\`, \`task_list\` and \`task_delete\`, listed first in
      \`tools/list\` to every caller, acting only on the caller's own tasks.`),
    // 0 turns a budget off; a result limit of 0 would fail every task, so it has a floor.
    maxStoredBytesPerPrincipal: int(0).default(DEFAULTS.maxStoredBytesPerPrincipal).describe(`Bytes of tasks one
      principal may hold in the task store, across all replicas: each task counts 3 KiB for its record, timeline, key
      and listing entries, plus its kept call (JSON) while it runs and its result or error (JSON) once it ended, from
      its creation until it expires or is deleted. At the budget a new task is refused (HTTP 503 + \`Retry-After\`, a
      JSON-RPC error naming the budget and when its oldest charge expires) until tasks expire or are deleted; results
      already kept are never dropped early. 0 = no budget.`),
    maxStoredBytes: int(0).default(DEFAULTS.maxStoredBytes).describe(`The same for all principals together, per task
      store (every replica sharing it). 0 = no budget.`),
    maxResultBytes: int(1024).default(DEFAULTS.maxResultBytes).describe(`The largest result (or error) one task stores,
      as JSON. A larger one fails its task with \`Task result too large\` instead of being stored. At least 1024. Keep
      it at or above the upstreams' \`maxMessageBytes\` unless tasks' results should be smaller than what plain calls
      may answer.`),
    maxPendingApprovalsPerPrincipal: int(0)
      .default(DEFAULTS.maxPendingApprovalsPerPrincipal)
      .describe(`Calls one principal may have waiting for approval at once
    (\`tasks.rules[].approval\`), across all replicas. Past it a new held call is refused at creation, in both
    revisions, with a JSON-RPC error saying how many wait and naming this key, until some are decided, expire or are
    cancelled. It keeps one principal from burying approvers' lists under its own calls. 0 = no cap.`),
  })
  .superRefine((tasks, ctx) => {
    // A rule is checked merged onto the defaults, because that is the policy a tool actually gets.
    const defaults = { ...DEFAULT_POLICY, ...stripUndefined(tasks.defaults) };
    if (defaults.ttlMs > defaults.maxTtlMs) {
      const key = tasks.defaults.ttlMs !== undefined ? 'ttlMs' : 'maxTtlMs';
      ctx.addIssue({
        code: 'custom',
        path: ['defaults', key],
        input: defaults[key],
        message: `ttlMs (${defaults.ttlMs}) must not exceed maxTtlMs (${defaults.maxTtlMs})`,
      });
    }
    // A background call's answer names the task tools: without them its result could never be fetched.
    const background = backgroundSetting(defaults, tasks.rules);
    if (tasks.taskTools.enabled === false && background !== undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['taskTools', 'enabled'],
        input: false,
        message: `plainCalls: background (${background}) needs the task tools: its callers fetch their results with them`,
      });
    }
    tasks.rules.forEach((rule, i) => {
      const merged = { ...defaults, ...stripUndefined(rule) };
      // A held call waits as a task: a tool that may never be one could not be held.
      if (rule.approval !== undefined && merged.mode === 'forbidden') {
        ctx.addIssue({ code: 'custom', path: ['rules', i, 'approval'], input: undefined, message: `a call held for approval waits as a task: tools matching "${rule.match}" must not have mode: forbidden` });
      }
      if ((rule.ttlMs !== undefined || rule.maxTtlMs !== undefined) && merged.ttlMs > merged.maxTtlMs) {
        const key = rule.ttlMs !== undefined ? 'ttlMs' : 'maxTtlMs';
        ctx.addIssue({
          code: 'custom',
          path: ['rules', i, key],
          input: merged[key],
          message: `ttlMs (${merged.ttlMs}) must not exceed maxTtlMs (${merged.maxTtlMs}) for tools matching "${rule.match}"`,
        });
      }
    });
  });

function stripUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}
