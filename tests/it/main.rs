//! Integration tests: the real server on a loopback port, a real WebSocket
//! client, a temporary SQLite file per test. Every message the client receives
//! is validated against `protocol/outbound/`.

mod agent_loop;
mod auth;
mod bad_input;
mod bench;
mod branches;
mod branches_prop;
mod chat_list;
mod cluster;
mod connections;
mod continued;
mod crash;
mod database_chat;
mod delete;
mod demo;
mod deploy;
mod fanout;
mod first_run;
mod fuzz;
mod group;
mod hardening;
mod hitl;
mod input;
mod layers;
mod mcp;
mod mcp_everything;
mod metrics;
mod mock_llm;
mod models;
mod multitask;
mod openapi;
mod page;
mod passthrough;
mod pg_outage;
mod providers;
mod rejoin;
mod rest;
mod resume;
mod route_limits;
mod soak;
mod sse;
mod support;
mod template;
mod vendors;
mod workflows;
