// A .svc/policy.json that svc refuses: the message names the key and what it must be.
export class PolicyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PolicyError';
  }
}
