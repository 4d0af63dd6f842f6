"""tau2-bench itself, as the reference the evaluation tests compare agentry against.

  tau2_check.py actions DOMAIN   every task's expected actions run on a fresh environment:
                                 {task_id: {"db": hash, "user_db": hash, "outputs": [...]}}
  tau2_check.py rescore FILE     tau2's own re-scorer (`tau2 evaluate-trajs`) on a
                                 results.json: {simulation_id: reward}
  tau2_check.py metrics FILE     what `tau2 view` shows as the agent's metrics for a
                                 results.json: {"avg_reward", "pass_hat_ks", "infra_error_count"}
  tau2_check.py user DOMAIN      the user simulator's system prompt for every task:
                                 {task_id: {"system": ..., "tools": [names]}}
  tau2_check.py judge FILE       the prompt tau2's NL-assertion judge is sent for
                                 {"messages": [...], "assertions": [...]}: {"system", "user"}

TAU2_DATA_DIR must hold tau2/domains/<domain>.
"""
import json
import sys

from tau2.registry import registry


def actions(domain):
    env_ctor = registry.get_env_constructor(domain)
    tasks = registry.get_tasks_loader(domain)(None)
    out = {}
    for task in tasks:
        env = env_ctor()
        init = task.initial_state
        env.set_state(
            initialization_data=init.initialization_data if init else None,
            initialization_actions=init.initialization_actions if init else None,
            message_history=(init.message_history or []) if init else [],
        )
        outputs = []
        for i, a in enumerate((task.evaluation_criteria.actions or []) if task.evaluation_criteria else []):
            from tau2.data_model.message import ToolCall
            msg = env.get_response(ToolCall(id=f"a{i}", name=a.name, arguments=a.arguments, requestor=a.requestor))
            outputs.append({"content": msg.content, "error": msg.error})
        out[task.id] = {"db": env.get_db_hash(), "user_db": env.get_user_db_hash(), "outputs": outputs}
    json.dump(out, sys.stdout)


def rescore(path):
    from tau2.data_model.simulation import Results
    from tau2.scripts.evaluate_trajectories import compute_simulation_rewards

    results = Results.load(path)
    scored = compute_simulation_rewards(results)
    json.dump({s.id: s.reward_info.reward for s in scored.simulations}, sys.stdout)


def metrics(path):
    from tau2.data_model.simulation import Results
    from tau2.metrics.agent_metrics import compute_metrics

    m = compute_metrics(Results.load(path))
    json.dump(
        {"avg_reward": m.avg_reward, "pass_hat_ks": m.pass_hat_ks, "infra_error_count": m.infra_error_count},
        sys.stdout,
    )


def user(domain):
    from tau2.user.user_simulator import UserSimulator

    env = registry.get_env_constructor(domain)()
    out = {}
    for task in registry.get_tasks_loader(domain)(None):
        try:
            tools = env.get_user_tools(include=task.user_tools) or None
        except Exception:
            tools = None
        sim = UserSimulator(llm="none", instructions=str(task.user_scenario), tools=tools)
        out[task.id] = {"system": sim.system_prompt, "tools": [t.name for t in tools or []]}
    json.dump(out, sys.stdout)


def judge(path):
    from pydantic import TypeAdapter

    import tau2.evaluator.evaluator_nl_assertions as nl
    from tau2.data_model.message import AssistantMessage, Message

    case = json.load(open(path))
    messages = TypeAdapter(list[Message]).validate_python(case["messages"])
    sent = {}

    def fake_generate(model, messages, **kwargs):
        sent["system"] = messages[0].content
        sent["user"] = messages[1].content
        return AssistantMessage(role="assistant", content='{"results": []}')

    nl.generate = fake_generate
    nl.NLAssertionsEvaluator.evaluate_nl_assertions(messages, case["assertions"])
    json.dump(sent, sys.stdout)


if __name__ == "__main__":
    {"actions": actions, "rescore": rescore, "judge": judge, "user": user, "metrics": metrics}[sys.argv[1]](sys.argv[2])
