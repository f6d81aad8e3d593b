export * from './listener-plan.js';
