// The ports revisions declare for the gateway to implement (sessions and their deliveries, replica messages),
// re-exported so the gateway names none of the revision folders: outside src/protocol/, nothing imports one
// (.dependency-cruiser.cjs). A revision that declares a port adds its export here.
export type { Delivery, InflightCall, Session, Sessions } from './rev2025-11-25/session.js';
export type { StatelessPeerMessages } from './rev2026-07-28/peers.js';
