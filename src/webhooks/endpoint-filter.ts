// Whether an endpoint wants an event: it subscribed to the event's type, and its `tools` and `principals` globs (when
// given) match the task's exposed tool name and its principal. Principal globs mean what they mean in `auth.access`
// (config/access.ts matches both): a task of no authenticated principal matches no principal glob. A connection event
// (issue 41) is about no tool: `tools` filters task and approval events only.
import { principalMatches } from '../config/access.js';
import { globMatches } from '../config/policy.js';
import type { WebhookConfig } from '../config/types.js';
import { nameOf } from '../principals.js';
import type { WebhookEvent } from './webhook-events.js';

export function endpointWants(endpoint: WebhookConfig, event: WebhookEvent): boolean {
  if (!endpoint.events.includes(event.type)) return false;
  const tool = event.facts.tool;
  if (endpoint.tools !== undefined && tool !== undefined && !endpoint.tools.some((glob) => globMatches(glob, tool))) return false;
  if (endpoint.principals === undefined) return true;
  const who = nameOf(event.facts.principal);
  return who !== undefined && endpoint.principals.some((glob) => principalMatches(glob, who));
}
