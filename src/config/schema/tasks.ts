// The `tasks` section of the config schema: the task policy (defaults and per-tool rules), the answer a background
// call gets, and the task tools. Its checks compare a rule merged onto the defaults, the policy a tool really gets.
import { z } from 'zod';
import { backgroundSetting } from '../policy.js';
import type { TaskMode } from '../types.js';
import { DEFAULT_POLICY, DEFAULTS } from './defaults.js';
import { int, prefix, toolName } from './fields.js';

export const TASK_MODES = ['forbidden', 'optional', 'required', 'always', 'never'] as const;

const mode = z.enum(TASK_MODES).transform((m): TaskMode => (m === 'always' ? 'required' : m === 'never' ? 'forbidden' : m));

// Every field optional: used for `tasks.defaults` (merged onto DEFAULT_POLICY) and for rules (merged onto defaults).
const policyShape = {
  mode: mode.optional(),
  ttlMs: int(1).optional(),
  maxTtlMs: int(1).optional(),
  pollIntervalMs: int(1).optional(),
  maxRunMs: int(0).optional(),
  taskAfterMs: int(0).optional(),
  concurrency: int(0).optional(),
  maxTasksPerPrincipal: int(0).optional(),
  keepAliveProgressMs: int(0).optional(),
  plainCalls: z.enum(['wait', 'background']).optional(),
  // Retrying on loss means two attempts unless said otherwise.
  retry: z
    .strictObject({ onLoss: z.boolean(), maxAttempts: int(1).optional() })
    .transform((r) => ({ onLoss: r.onLoss, maxAttempts: r.maxAttempts ?? (r.onLoss ? 2 : 1) }))
    .optional(),
};

export const PolicyDefaultsSchema = z.strictObject(policyShape);

// Rules only: holding every tool for approval is a rule `match: "*"` away, and says so where it is read.
export const ApprovalSchema = z
  .strictObject({
    approvers: z.array(z.string().trim().min(1, { error: 'expected a non-empty principal glob' })).default(() => []),
    scopes: z.array(z.string().trim().min(1, { error: 'expected a non-empty scope' })).default(() => []),
    timeoutMs: int(1),
    allowSelf: z.boolean().default(false),
    onCallerGone: z.enum(['keep', 'cancel']).default('keep'),
  })
  .superRefine((approval, ctx) => {
    if (approval.approvers.length === 0 && approval.scopes.length === 0) {
      ctx.addIssue({ code: 'custom', path: ['approvers'], input: approval.approvers, message: 'name at least one approver (a principal glob) or scope: otherwise nobody could ever approve' });
    }
  });

export const RuleSchema = z.strictObject({
  match: z.string().trim().min(1, { error: 'expected a non-empty glob on the exposed tool name' }),
  ...policyShape,
  approval: ApprovalSchema.optional(),
});

export const TaskToolsSchema = z
  .strictObject({
    // `auto`: listed when any rule (or the defaults) says plainCalls: background.
    enabled: z.union([z.boolean(), z.literal('auto')]).default('auto'),
    prefix: prefix.default(DEFAULTS.taskToolPrefix),
    names: z
      .strictObject({ result: toolName.optional(), status: toolName.optional(), cancel: toolName.optional(), list: toolName.optional(), delete: toolName.optional() })
      .prefault({}),
    waitSeconds: int(0).default(DEFAULTS.taskToolWaitSeconds),
    maxWaitSeconds: int(1, 3_600).default(DEFAULTS.taskToolMaxWaitSeconds),
  })
  .superRefine((tools, ctx) => {
    if (tools.waitSeconds > tools.maxWaitSeconds) {
      ctx.addIssue({ code: 'custom', path: ['waitSeconds'], input: tools.waitSeconds, message: `must not exceed maxWaitSeconds (${tools.maxWaitSeconds})` });
    }
  });

export const TasksSchema = z
  .strictObject({
    defaults: PolicyDefaultsSchema.prefault({}),
    rules: z.array(RuleSchema).default(() => []),
    immediateResponse: z.string().default(DEFAULTS.immediateResponse),
    taskTools: TaskToolsSchema.prefault({}),
    // 0 turns a budget off; a result limit of 0 would fail every task, so it has a floor.
    maxStoredBytesPerPrincipal: int(0).default(DEFAULTS.maxStoredBytesPerPrincipal),
    maxStoredBytes: int(0).default(DEFAULTS.maxStoredBytes),
    maxResultBytes: int(1024).default(DEFAULTS.maxResultBytes),
    maxPendingApprovalsPerPrincipal: int(0).default(DEFAULTS.maxPendingApprovalsPerPrincipal),
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
