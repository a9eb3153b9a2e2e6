//! The executor's [`TaskCreator`] over the task engine: a timer whose
//! notify is an asyncflow task creates one task per fire.

use async_trait::async_trait;
use xtimer_asyncflow::{Error, TaskData, Tasks};
use xtimer_core::fire::FireKey;
use xtimer_core::timer::AsyncflowNotify;
use xtimer_executor::{CreateTaskError, TaskCreator};

/// Creates the tasks of timer fires in the node's task engine.
pub struct TimerTasks(pub Tasks);

/// The uuid part of the task id of a fire: the same for every attempt at
/// it, so a repeated create of the fire stores one task.
pub fn fire_uuid(key: FireKey) -> String {
    format!("{:016x}-{:016x}", key.timer_id, key.run_ms)
}

#[async_trait]
impl TaskCreator for TimerTasks {
    async fn create_task(&self, app: &str, notify: &AsyncflowNotify, key: FireKey) -> Result<String, CreateTaskError> {
        // createTimer checked the owner; a fire checks again, as every
        // caller of the task API is checked.
        if let Some(owner) = self.0.owner_of(&notify.task_type).await.map_err(create_error)? {
            if owner != app {
                return Err(CreateTaskError::NotOwner { task_type: notify.task_type.clone(), app: app.to_string() });
            }
        }
        let task = TaskData {
            user_id: app.to_string(),
            task_type: notify.task_type.clone(),
            task_stage: notify.task_stage.clone(),
            context: notify.context.clone(),
            ..TaskData::default()
        };
        self.0.create_with_uuid(task, Some(fire_uuid(key))).await.map_err(create_error)
    }
}

/// What the executor needs to know of an engine error: whether the task
/// can never be created as it is, or storing it failed.
fn create_error(err: Error) -> CreateTaskError {
    match err {
        Error::UnknownType(task_type) => CreateTaskError::UnknownType(task_type),
        Error::NotOwner(_) | Error::Invalid(_) | Error::BadId(_) | Error::TypeClash(..) | Error::TypeExists(_) => {
            CreateTaskError::Invalid(Box::new(err))
        }
        Error::TaskNotFound(_) | Error::Store(_) | Error::WriteFailed(_) | Error::Interrupted | Error::ShuttingDown => {
            CreateTaskError::Storage(Box::new(err))
        }
    }
}
