// Where plain calls (tools/call without a task asked for) go to the background, and so where the task tools are
// needed: the tasks schema refuses turning them off there, and `taskTools.enabled: auto` turns them on (build.ts).
// Read from the file's own form (defaults and rules with only what they say), below the policy layer.

/** `wait`: answered when the upstream answers; `background`: run as a task, answered with a handle past taskAfterMs. */
export const PLAIN_CALLS = ['wait', 'background'] as const;
export type PlainCalls = (typeof PLAIN_CALLS)[number];

/**
 * Where plain calls first go to the background (`tasks.defaults` or `tasks.rules[i]`, a rule with `approval` and
 * no `plainCalls` of its own included), or undefined when nothing does: the task tools are needed exactly then.
 */
export function backgroundSetting(defaults: { plainCalls?: PlainCalls }, rules: readonly { plainCalls?: PlainCalls; approval?: unknown }[]): string | undefined {
  if (defaults.plainCalls === 'background') return 'tasks.defaults';
  const i = rules.findIndex((rule) => (rule.plainCalls ?? (rule.approval === undefined ? undefined : 'background')) === 'background');
  if (i < 0) return undefined;
  return rules[i]?.plainCalls === undefined ? `tasks.rules[${i}], whose approval makes plainCalls default to background` : `tasks.rules[${i}]`;
}

/**
 * Whether the task tools are listed under `taskTools.enabled: auto`: where plain calls go to the background, and
 * where a held call may outlive its plain caller (`plainCalls: wait` with `approval.onCallerGone: keep`), whose
 * result the caller then fetches with them.
 */
export function taskToolsWanted(defaults: { plainCalls?: PlainCalls }, rules: readonly { plainCalls?: PlainCalls; approval?: { onCallerGone?: string } }[]): boolean {
  return backgroundSetting(defaults, rules) !== undefined || rules.some((rule) => rule.approval !== undefined && rule.approval.onCallerGone !== 'cancel');
}
