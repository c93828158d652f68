import { Server, Worker, ValidationError } from "shoal";

export class CalculateExp extends Worker {
  forward(req: any): { y: number } {
    if (!("x" in req)) throw new ValidationError("cannot find key 'x'");
    const x = Number(req.x);
    if (Number.isNaN(x)) throw new ValidationError("cannot convert 'x' value to float");
    return { y: Math.exp(x) };
  }
}

const server = new Server();
server.appendWorker(CalculateExp, { num: 2 }); // two workers in parallel
server.run();
