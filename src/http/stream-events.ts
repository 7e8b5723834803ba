// stream.opened / stream.closed for the SSE streams the front hands to clients, of either revision.
import type { ServerResponse } from 'node:http';
import type { GatewayEventMap, GatewayEvents } from '../events.js';
import { onStreamOpen } from '../streams/sse-connection.js';

export type StreamKind = GatewayEventMap['stream.opened']['kind'];

/**
 * Announces `response` as a `kind` stream if it becomes one: opened when its SSE headers go out (a response
 * answered as plain JSON never was a stream), closed when it closes. The close listener goes on now, so a client
 * gone before the headers went out leaves no opened without its closed.
 */
export function announceStream(events: GatewayEvents, kind: StreamKind, response: ServerResponse): void {
  if (!events.listened('stream.opened') && !events.listened('stream.closed')) return;
  let state: 'waiting' | 'open' | 'closed' = 'waiting';
  onStreamOpen(response, () => {
    if (state !== 'waiting') return; // headers written to a response whose client already left
    state = 'open';
    events.emit('stream.opened', { kind });
  });
  response.once('close', () => {
    if (state === 'open') events.emit('stream.closed', { kind });
    state = 'closed';
  });
}
