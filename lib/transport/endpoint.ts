/** One side of a TCP connection, as Node's `socket.address()` reports it. */
export interface Endpoint {
  address: string;
  port: number;
  family: string;
}
