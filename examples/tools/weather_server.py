#!/usr/bin/env python3
"""A stand-in weather API for the example agents: POST /weather {"city": ...}.

Standard library only. Prints the Authorization header it receives, to show
that agentwire forwards the caller's bearer token.
"""
import hashlib
import json
from http.server import BaseHTTPRequestHandler, HTTPServer


class Weather(BaseHTTPRequestHandler):
    def do_POST(self):
        length = int(self.headers.get("Content-Length", 0))
        try:
            city = json.loads(self.rfile.read(length) or b"{}").get("city", "")
        except json.JSONDecodeError:
            city = ""
        if self.path != "/weather" or not city:
            self.send_response(400)
            self.end_headers()
            self.wfile.write(b'{"error": "POST /weather with {\\"city\\": \\"...\\"}"}')
            return
        seed = int(hashlib.sha256(city.lower().encode()).hexdigest(), 16)
        body = {
            "city": city,
            "temperature_c": seed % 35 - 5,
            "conditions": ["sunny", "cloudy", "rain", "snow", "windy"][seed % 5],
        }
        print("authorization:", self.headers.get("Authorization"), "city:", city)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(json.dumps(body).encode())


if __name__ == "__main__":
    HTTPServer(("127.0.0.1", 9000), Weather).serve_forever()
