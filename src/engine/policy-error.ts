// A .svc/policy.json that svc refuses: the message names the key and what it must be.
import { RefusedError } from '../errors.ts';

export class PolicyError extends RefusedError {}
