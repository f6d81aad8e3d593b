export * from './alpn.js';
export * from './listener-plan.js';
