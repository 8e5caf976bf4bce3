// Verifies webhook deliveries with the Standard Webhooks reference library (npm
// standardwebhooks), as a receiver would. Input on stdin: {"secrets": [...],
// "deliveries": [{"headers": {...}, "body": "..."}]}. Output on stdout: for each
// delivery, for each secret, true when that secret verifies it (and the body parses).
import { Webhook } from "standardwebhooks";

let input = "";
for await (const chunk of process.stdin) input += chunk;
const { secrets, deliveries } = JSON.parse(input);
const verifiers = secrets.map((secret) => new Webhook(secret));
const results = deliveries.map(({ headers, body }) =>
  verifiers.map((verifier) => {
    try {
      verifier.verify(body, headers);
      return true;
    } catch {
      return false;
    }
  }),
);
process.stdout.write(JSON.stringify(results));
