/* placeholder */ typedef int placeholder_session;
